"use client";

// The app's keyboard shortcuts (lib/shortcuts.ts): the global key handler
// and the help dialog that lists them, opened by "?" (when not typing) or
// the sidebar's "Keyboard shortcuts" button.

import { useRouter } from "next/navigation";
import { useEffect, useRef, useState, type FC } from "react";
import { SHORTCUTS, isTyping, shortcutOf, type ShortcutId } from "@/lib/shortcuts";

const OPEN_HELP = "threadline:shortcuts";

/** The visible way to the shortcuts (the sidebar's). */
export const ShortcutsButton: FC = () => (
  <button
    type="button"
    className="button"
    data-testid="shortcuts-open"
    aria-keyshortcuts="Shift+?"
    aria-haspopup="dialog"
    onClick={() => window.dispatchEvent(new Event(OPEN_HELP))}
  >
    Keyboard shortcuts <kbd aria-hidden="true">?</kbd>
  </button>
);

/** The branch picker the focus is in (its message's), else the last one shown. */
function pickerFor(active: Element | null): HTMLElement | null {
  const inMessage = active?.closest('[data-testid="user-message"], [data-testid="assistant-message"]');
  const own = inMessage?.querySelector<HTMLElement>('[data-testid="branch-picker"]');
  if (own) return own;
  const all = document.querySelectorAll<HTMLElement>('[data-testid="branch-picker"]');
  return all.length ? (all[all.length - 1] ?? null) : null;
}

function stepBranch(label: "Previous branch" | "Next branch"): void {
  const button = pickerFor(document.activeElement)?.querySelector<HTMLButtonElement>(`button[aria-label="${label}"]`);
  if (button && !button.disabled) button.click();
}

export const Shortcuts: FC<{ toggleSidebar: () => void }> = ({ toggleSidebar }) => {
  const router = useRouter();
  const dialog = useRef<HTMLDialogElement>(null);
  const [mac, setMac] = useState(false);

  useEffect(() => {
    const open = () => {
      setMac(/Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent));
      if (dialog.current && !dialog.current.open) dialog.current.showModal();
    };
    const actions: Record<ShortcutId, (() => void) | null> = {
      help: open,
      newChat: () => router.push("/welcome"),
      search: null, // SearchBox's own handler
      branchTree: null, // BranchTree's own handler
      composer: () => document.querySelector<HTMLElement>('textarea[aria-label="Message"]')?.focus(),
      prevBranch: () => stepBranch("Previous branch"),
      nextBranch: () => stepBranch("Next branch"),
      sidebar: toggleSidebar,
    };
    const onKey = (e: KeyboardEvent) => {
      if (e.defaultPrevented || e.isComposing) return;
      // Inside another dialog (search, branches, settings) its keys rule.
      const active = document.activeElement;
      if (active?.closest("dialog[open]") && !dialog.current?.contains(active)) return;
      const id = shortcutOf(e, isTyping(active));
      const act = id ? actions[id] : null;
      if (!act) return;
      e.preventDefault();
      act();
    };
    window.addEventListener("keydown", onKey);
    window.addEventListener(OPEN_HELP, open);
    return () => {
      window.removeEventListener("keydown", onKey);
      window.removeEventListener(OPEN_HELP, open);
    };
  }, [router, toggleSidebar]);

  const keyName = (k: string) => (k === "Mod" ? (mac ? "⌘" : "Ctrl") : k);
  return (
    <dialog
      ref={dialog}
      className="help-dialog"
      aria-labelledby="help-dialog-title"
      data-testid="shortcuts-dialog"
      onClick={(e) => {
        if (e.target === dialog.current) dialog.current?.close();
      }}
    >
      <div className="image-dialog-head">
        <h2 id="help-dialog-title">Keyboard shortcuts</h2>
        <button type="button" className="button" onClick={() => dialog.current?.close()}>
          Close
        </button>
      </div>
      <dl className="shortcut-list" data-testid="shortcut-list">
        {SHORTCUTS.map((s) => (
          <div key={s.id} style={{ display: "contents" }}>
            <dt>
              {s.keys.map((k, i) => (
                <span key={k}>
                  {i > 0 ? " + " : null}
                  <kbd>{keyName(k)}</kbd>
                </span>
              ))}
            </dt>
            <dd>{s.what}</dd>
          </div>
        ))}
      </dl>
      <p className="muted small">
        In the thread list, the arrow keys move between conversations, Enter opens one, F2 renames and Delete deletes it. Single
        keys (?, /, [, ]) work when you are not typing.
      </p>
    </dialog>
  );
};
