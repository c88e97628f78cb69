"use client";

// Branch names in the ‹ n / m › picker: the shown branch's name beside the
// count (and in the picker's accessible name and tooltip), and a control to
// name, rename or clear it. Names live in the thread's metadata
// (lib/branchLabels); a failed save says why and keeps what was typed.

import { useEffect, useRef, useState, useSyncExternalStore, type FC, type FormEvent } from "react";
import { currentLabels, labelProblem, loadLabels, saveLabel, subscribeLabels, type BranchLabels } from "@/lib/branchLabels";

export { pickerName } from "@/lib/branchLabels";
import { describeError } from "@/lib/errors";
import { refocusAfterRender } from "@/lib/refocus";

const NONE: BranchLabels = {};

/** The thread's branch names, loaded once per page and shared. */
export function useBranchLabels(threadId: string | null): BranchLabels {
  useEffect(() => {
    if (threadId) loadLabels(threadId);
  }, [threadId]);
  return useSyncExternalStore(
    subscribeLabels,
    () => (threadId ? currentLabels(threadId) : NONE),
    () => NONE,
  );
}

export const BranchNameControl: FC<{ threadId: string; messageId: string; name: string | undefined; index: number }> = ({
  threadId,
  messageId,
  name,
  index,
}) => {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);

  const backToButton = () =>
    refocusAfterRender(() =>
      document.querySelector<HTMLButtonElement>(`[data-testid="branch-picker"][data-index="${index}"] [data-testid="branch-name-edit"]`),
    );
  const open = () => {
    setDraft(name ?? "");
    setError(null);
    setEditing(true);
    requestAnimationFrame(() => input.current?.select());
  };
  const close = () => {
    setEditing(false);
    backToButton();
  };
  const save = async (value: string) => {
    const problem = labelProblem(value);
    if (problem) {
      setError(problem);
      return;
    }
    setBusy(true);
    try {
      await saveLabel(threadId, messageId, value);
      close();
    } catch (err) {
      // What was typed stays in the box for another try.
      setError(`The name was not saved: ${describeError(err).message}`);
    } finally {
      setBusy(false);
    }
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void save(draft);
  };

  if (!editing) {
    return (
      <button
        type="button"
        className="link branch-name-edit"
        data-testid="branch-name-edit"
        aria-label={name ? "Rename this branch" : "Name this branch"}
        title={name ? "Rename this branch" : "Name this branch"}
        onClick={open}
      >
        {name ? "Rename" : "Name"}
      </button>
    );
  }
  return (
    <form
      className="branch-name-form"
      data-testid="branch-name-form"
      onSubmit={submit}
      onKeyDown={(e) => {
        if (e.key === "Escape") {
          e.preventDefault();
          e.stopPropagation();
          close();
        }
      }}
    >
      <input
        ref={input}
        className="branch-name-input"
        aria-label="Branch name"
        placeholder="e.g. shorter answer"
        value={draft}
        onChange={(e) => setDraft(e.target.value)}
        aria-invalid={error ? true : undefined}
        aria-describedby={error ? `branch-name-error-${index}` : undefined}
        disabled={busy}
      />
      <button type="submit" className="button primary" disabled={busy}>
        Save
      </button>
      {name ? (
        <button type="button" className="button" disabled={busy} onClick={() => void save("")}>
          Clear
        </button>
      ) : null}
      <button type="button" className="button" disabled={busy} onClick={close}>
        Cancel
      </button>
      {error ? (
        <span className="branch-name-error" role="alert" id={`branch-name-error-${index}`} data-testid="branch-name-error">
          {error}
        </span>
      ) : null}
    </form>
  );
};
