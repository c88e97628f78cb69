"use client";

// Delete with undo: the thread leaves the list at once and a toast offers
// Undo for a few seconds; only then is it deleted on the service. Leaving
// the page deletes it at once (the person did not undo).

import { useCallback, useEffect, useRef, useState, type ReactNode } from "react";
import { ApiError, deleteThread } from "@/lib/api";
import type { ThreadSummary } from "@/lib/types";

/** How long Undo is offered. */
export const UNDO_MS = 5000;

type Pending = { thread: ThreadSummary; timer: ReturnType<typeof setTimeout> };

export function useUndoableDelete(opts: {
  /** The delete is final (or failed): reload the list. */
  onSettled: () => void;
  /** The delete was undone: show the thread again. */
  onRestore: (t: ThreadSummary) => void;
  onError: (err: unknown) => void;
}): { schedule: (t: ThreadSummary) => void; toast: ReactNode } {
  const [pending, setPending] = useState<Pending | null>(null);
  const pendingRef = useRef<Pending | null>(null);
  const optsRef = useRef(opts);
  useEffect(() => {
    optsRef.current = opts;
  });

  const commit = useCallback((p: Pending) => {
    clearTimeout(p.timer);
    if (pendingRef.current === p) {
      pendingRef.current = null;
      setPending(null);
    }
    deleteThread(p.thread.thread_id).then(
      () => optsRef.current.onSettled(),
      (err: unknown) => {
        if (!(err instanceof ApiError && err.status === 404)) {
          optsRef.current.onError(err);
          optsRef.current.onRestore(p.thread);
        }
        optsRef.current.onSettled();
      },
    );
  }, []);

  const schedule = useCallback(
    (thread: ThreadSummary) => {
      if (pendingRef.current) commit(pendingRef.current); // one toast at a time: the earlier one is final
      const p: Pending = { thread, timer: setTimeout(() => commit(p), UNDO_MS) };
      pendingRef.current = p;
      setPending(p);
    },
    [commit],
  );

  const undo = () => {
    const p = pendingRef.current;
    if (!p) return;
    clearTimeout(p.timer);
    pendingRef.current = null;
    setPending(null);
    optsRef.current.onRestore(p.thread);
  };

  // Leaving the page (or the list going away) makes a pending delete final.
  useEffect(() => {
    const leave = () => {
      if (pendingRef.current) commit(pendingRef.current);
    };
    window.addEventListener("pagehide", leave);
    return () => {
      window.removeEventListener("pagehide", leave);
      leave();
    };
  }, [commit]);

  const toast = pending ? (
    <div className="toast" role="status" data-testid="undo-toast">
      <span>Deleted “{pending.thread.title || "Untitled"}”.</span>
      <button type="button" className="button" onClick={undo}>
        Undo
      </button>
    </div>
  ) : null;
  return { schedule, toast };
}
