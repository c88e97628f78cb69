"use client";

import Link from "next/link";
import { usePathname, useRouter } from "next/navigation";
import { useEffect, useRef, useState, useSyncExternalStore, type FC } from "react";
import { ApiError, THREADS_CHANGED, deleteThread, renameThread } from "@/lib/api";
import { ThreadListStore } from "@/lib/threadList";
import type { ThreadSummary } from "@/lib/types";

export const Sidebar: FC = () => {
  const pathname = usePathname();
  const router = useRouter();
  const currentId = pathname?.startsWith("/chat/") ? decodeURIComponent(pathname.slice("/chat/".length)) : null;

  const [store] = useState(() => new ThreadListStore());
  const { threads, cursor, loading, loaded, error } = useSyncExternalStore(store.subscribe, store.getState, store.getState);
  const [editing, setEditing] = useState<string | null>(null);
  const [draft, setDraft] = useState("");

  useEffect(() => {
    void store.refresh();
    const onChange = () => void store.refresh();
    window.addEventListener(THREADS_CHANGED, onChange);
    return () => window.removeEventListener(THREADS_CHANGED, onChange);
  }, [store]);

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
      store.setError(err instanceof Error ? err.message : String(err));
    }
    void store.refresh();
  };

  const remove = async (t: ThreadSummary) => {
    if (!window.confirm(`Delete “${t.title || "Untitled"}” and all its messages?`)) return;
    try {
      await deleteThread(t.thread_id);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) {
        store.setError(err instanceof Error ? err.message : String(err));
        return;
      }
    }
    store.update((prev) => prev.filter((x) => x.thread_id !== t.thread_id));
    if (t.thread_id === currentId) router.push("/welcome");
    void store.refresh();
  };

  return (
    <nav className="sidebar" aria-label="Threads">
      <div className="sidebar-head">
        <Link href="/welcome" className="brand">
          Threadline
        </Link>
        <Link href="/welcome" className="button primary new-chat" data-testid="new-chat">
          New chat
        </Link>
      </div>
      {error ? (
        <div className="sidebar-error" role="alert">
          {error}
        </div>
      ) : null}
      <ul className="thread-list" data-testid="thread-list">
        {threads.map((t) => (
          <li
            key={t.thread_id}
            className={t.thread_id === currentId ? "thread-item active" : "thread-item"}
            data-testid="thread-item"
            data-thread-id={t.thread_id}
          >
            {editing === t.thread_id ? (
              <form
                className="rename-form"
                onSubmit={(e) => {
                  e.preventDefault();
                  void saveRename(t.thread_id);
                }}
              >
                <input
                  className="rename-input"
                  aria-label="Thread title"
                  value={draft}
                  autoFocus
                  onChange={(e) => setDraft(e.target.value)}
                  onKeyDown={(e) => {
                    if (e.key === "Escape") cancelRename();
                  }}
                  onBlur={() => void saveRename(t.thread_id)}
                />
              </form>
            ) : (
              <>
                <Link href={`/chat/${t.thread_id}`} className="thread-title" title={t.title || "Untitled"}>
                  {t.title || "Untitled"}
                </Link>
                <span className="thread-actions">
                  <button type="button" className="link" aria-label="Rename" title="Rename" onClick={() => startRename(t)}>
                    ✎
                  </button>
                  <button type="button" className="link" aria-label="Delete" title="Delete" onClick={() => void remove(t)}>
                    ✕
                  </button>
                </span>
              </>
            )}
          </li>
        ))}
      </ul>
      {cursor ? (
        <button type="button" className="button load-more" onClick={() => void store.loadMore()} disabled={loading}>
          {loading ? "Loading…" : "Load more"}
        </button>
      ) : null}
      {loaded && threads.length === 0 && !error ? <p className="muted small">No conversations yet.</p> : null}
    </nav>
  );
};
