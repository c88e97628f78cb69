"use client";

// The thread list: grouped by date (Today, Yesterday, …), the open thread
// highlighted (aria-current), full titles on hover, rename and delete, "Load
// more". Reloaded when a run starts or ends and after a change here; never
// polled. On phones it is the drawer of AppShell.

import Link from "next/link";
import { usePathname, useRouter } from "next/navigation";
import { useEffect, useRef, useState, useSyncExternalStore, type FC } from "react";
import { THREADS_CHANGED, announceThreadsChanged, renameThread } from "@/lib/api";
import { groupByDate } from "@/lib/dates";
import { getTheme, nextTheme, setTheme, subscribeTheme, type Theme } from "@/lib/theme";
import { ThreadListStore } from "@/lib/threadList";
import { SearchBox } from "./SearchBox";
import type { ThreadSummary } from "@/lib/types";
import { ImportButton } from "./LibraryActions";
import { ShortcutsButton } from "./Shortcuts";
import { useUndoableDelete } from "./UndoDelete";

const THEME_LABEL: Record<Theme, string> = { system: "Theme: system", dark: "Theme: dark", light: "Theme: light" };

const ThemeToggle: FC = () => {
  const theme = useSyncExternalStore(subscribeTheme, getTheme, () => "system" as const);
  return (
    <button
      type="button"
      className="button theme-toggle"
      data-testid="theme-toggle"
      data-theme-choice={theme}
      aria-label={`${THEME_LABEL[theme]} (change)`}
      onClick={() => setTheme(nextTheme(theme))}
    >
      {theme === "dark" ? "☾ " : theme === "light" ? "☀ " : "◐ "}
      {THEME_LABEL[theme]}
    </button>
  );
};

export const Sidebar: FC<{ drawerOpen?: boolean; onClose?: (refocus: boolean) => void }> = ({ drawerOpen = false, onClose }) => {
  const pathname = usePathname();
  const router = useRouter();
  const currentId = pathname?.startsWith("/chat/") ? decodeURIComponent(pathname.slice("/chat/".length)) : null;

  const [store] = useState(() => new ThreadListStore());
  const { threads, cursor, loading, loaded, error } = useSyncExternalStore(store.subscribe, store.getState, store.getState);
  const [editing, setEditing] = useState<string | null>(null);
  const [draft, setDraft] = useState("");
  const nav = useRef<HTMLElement>(null);

  useEffect(() => {
    void store.refresh();
    const onChange = () => void store.refresh();
    window.addEventListener(THREADS_CHANGED, onChange);
    return () => {
      window.removeEventListener(THREADS_CHANGED, onChange);
      store.dispose();
    };
  }, [store]);

  // The opened drawer takes the keyboard focus.
  useEffect(() => {
    if (drawerOpen) nav.current?.querySelector<HTMLElement>("a, button")?.focus();
  }, [drawerOpen]);

  // Which rename is open, for the handlers: submit and then blur save once.
  const editingRef = useRef<string | null>(null);
  const startRename = (t: ThreadSummary) => {
    editingRef.current = t.thread_id;
    setEditing(t.thread_id);
    setDraft(t.title ?? "");
  };
  const cancelRename = () => {
    editingRef.current = null;
    setEditing(null);
  };

  const saveRename = async (threadId: string) => {
    if (editingRef.current !== threadId) return; // already saved (submit, then blur)
    editingRef.current = null;
    const title = draft.trim();
    setEditing(null);
    if (!title) return;
    store.update((prev) => prev.map((t) => (t.thread_id === threadId ? { ...t, title } : t)));
    try {
      await renameThread(threadId, title);
    } catch (err) {
      store.setError(err);
    }
    // The list, and the open thread's header and tab, follow the new title.
    announceThreadsChanged();
  };

  // Delete with undo (UndoDelete.tsx): gone from the list at once, deleted after the toast.
  const undoable = useUndoableDelete({
    onSettled: () => void store.refresh(),
    onRestore: () => void store.refresh(),
    onError: (err) => store.setError(err),
  });
  const remove = (t: ThreadSummary) => {
    store.update((prev) => prev.filter((x) => x.thread_id !== t.thread_id));
    if (t.thread_id === currentId) router.push("/welcome");
    undoable.schedule(t);
  };

  const groups = groupByDate(threads, (t) => t.updated_at, new Date());

  // The list is one tab stop (roving tabindex): the open thread's link, or
  // the one last moved to, or the first; arrows move, Enter opens.
  const [roving, setRoving] = useState<string | null>(null);
  const tabStop = [roving, currentId].find((id) => id && threads.some((t) => t.thread_id === id)) ?? threads[0]?.thread_id ?? null;
  const onListKey = (e: React.KeyboardEvent<HTMLDivElement>) => {
    const move = listMove(e, threads, tabStop);
    if (!move) return;
    e.preventDefault();
    if (move.kind === "rename" || move.kind === "delete") {
      const t = threads.find((x) => x.thread_id === move.id);
      if (t) (move.kind === "rename" ? startRename : remove)(t);
      return;
    }
    setRoving(move.id);
    const item = nav.current?.querySelector<HTMLElement>(`[data-testid="thread-item"][data-thread-id="${CSS.escape(move.id)}"]`);
    const controls = Array.from(item?.querySelectorAll<HTMLElement>("a, button") ?? []);
    const at = controls.indexOf(document.activeElement as HTMLElement);
    const target = move.kind === "item" ? controls[0] : controls[(Math.max(at, 0) + move.step + controls.length) % controls.length];
    target?.focus();
  };

  return (
    <nav
      ref={nav}
      id="sidebar"
      className="sidebar"
      aria-label="Threads"
      onClick={(e) => {
        // Following a link closes the drawer (phones).
        if ((e.target as HTMLElement).closest("a")) onClose?.(false);
      }}
    >
      <div className="sidebar-head">
        <Link href="/welcome" className="brand">
          Threadline
        </Link>
        <Link href="/welcome" className="button primary new-chat" data-testid="new-chat">
          New chat
        </Link>
      </div>
      <SearchBox />
      {error ? (
        <div className="sidebar-error" role="alert">
          {error}
        </div>
      ) : null}
      <p id="thread-list-help" className="visually-hidden">
        Arrow keys move between conversations, Enter opens one, F2 renames and Delete deletes it.
      </p>
      <div
        className="thread-list"
        data-testid="thread-list"
        onKeyDown={onListKey}
        onFocus={(e) => {
          const id = (e.target as HTMLElement).closest<HTMLElement>("[data-thread-id]")?.dataset.threadId;
          if (id && id !== roving) setRoving(id);
        }}
      >
        {groups.map((g) => (
          <section key={g.label} aria-label={g.label} data-testid="thread-group">
            <h2 className="thread-group">{g.label}</h2>
            <ul className="thread-group-list">
              {g.items.map((t) => (
                <ThreadItem
                  key={t.thread_id}
                  thread={t}
                  current={t.thread_id === currentId}
                  tabbable={t.thread_id === tabStop}
                  editing={editing === t.thread_id}
                  draft={draft}
                  onDraft={setDraft}
                  onStartRename={startRename}
                  onSaveRename={(id) => void saveRename(id)}
                  onCancelRename={cancelRename}
                  onDelete={remove}
                />
              ))}
            </ul>
          </section>
        ))}
      </div>
      {cursor ? (
        <button type="button" className="button load-more" onClick={() => void store.loadMore()} disabled={loading}>
          {loading ? "Loading…" : "Load more"}
        </button>
      ) : null}
      {loaded && threads.length === 0 && !error ? <p className="muted small">No conversations yet.</p> : null}
      <ImportButton />
      <ShortcutsButton />
      <ThemeToggle />
      {undoable.toast}
    </nav>
  );
};

const ThreadItem: FC<{
  thread: ThreadSummary;
  current: boolean;
  tabbable: boolean;
  editing: boolean;
  draft: string;
  onDraft: (s: string) => void;
  onStartRename: (t: ThreadSummary) => void;
  onSaveRename: (id: string) => void;
  onCancelRename: () => void;
  onDelete: (t: ThreadSummary) => void;
}> = ({ thread: t, current, tabbable, editing, draft, onDraft, onStartRename, onSaveRename, onCancelRename, onDelete }) => {
  const title = t.title || "Untitled";
  return (
    <li className={current ? "thread-item active" : "thread-item"} data-testid="thread-item" data-thread-id={t.thread_id}>
      {editing ? (
        <form
          className="rename-form"
          onSubmit={(e) => {
            e.preventDefault();
            onSaveRename(t.thread_id);
          }}
        >
          <input
            className="rename-input"
            aria-label="Thread title"
            value={draft}
            autoFocus
            onChange={(e) => onDraft(e.target.value)}
            onKeyDown={(e) => {
              if (e.key === "Escape") {
                e.preventDefault(); // the rename only, not the drawer
                onCancelRename();
              }
            }}
            onBlur={() => onSaveRename(t.thread_id)}
          />
        </form>
      ) : (
        <>
          <Link
            href={`/chat/${t.thread_id}`}
            className="thread-title"
            title={`${title} — ${new Date(t.updated_at).toLocaleString()}`}
            aria-current={current ? "page" : undefined}
            aria-describedby="thread-list-help"
            tabIndex={tabbable ? 0 : -1}
          >
            {title}
          </Link>
          <span className="thread-actions">
            <button type="button" className="link" aria-label="Rename" title="Rename (F2)" tabIndex={-1} onClick={() => onStartRename(t)}>
              ✎
            </button>
            <button type="button" className="link" aria-label="Delete" title="Delete (Delete)" tabIndex={-1} onClick={() => onDelete(t)}>
              ✕
            </button>
          </span>
        </>
      )}
    </li>
  );
};

type ListMove = { kind: "item" | "control" | "rename" | "delete"; id: string; step: number };

/**
 * What a key in the thread list does: Up/Down/Home/End move between
 * threads, Left/Right between a thread's link and its buttons, F2 renames,
 * Delete deletes; null for any other key (Enter follows the link itself).
 */
function listMove(e: React.KeyboardEvent, threads: readonly ThreadSummary[], tabStop: string | null): ListMove | null {
  if (e.altKey || e.ctrlKey || e.metaKey || (e.target as HTMLElement).tagName === "INPUT") return null;
  const id = (e.target as HTMLElement).closest<HTMLElement>("[data-thread-id]")?.dataset.threadId ?? tabStop;
  const at = threads.findIndex((t) => t.thread_id === id);
  if (at < 0 || !id) return null;
  const to = (i: number): ListMove | null => {
    const t = threads[Math.min(Math.max(i, 0), threads.length - 1)];
    return t ? { kind: "item", id: t.thread_id, step: 0 } : null;
  };
  switch (e.key) {
    case "ArrowDown":
      return to(at + 1);
    case "ArrowUp":
      return to(at - 1);
    case "Home":
      return to(0);
    case "End":
      return to(threads.length - 1);
    case "ArrowRight":
      return { kind: "control", id, step: 1 };
    case "ArrowLeft":
      return { kind: "control", id, step: -1 };
    case "F2":
      return { kind: "rename", id, step: 0 };
    case "Delete":
      return { kind: "delete", id, step: 0 };
    default:
      return null;
  }
}
