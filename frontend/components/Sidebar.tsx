"use client";

import Link from "next/link";
import { usePathname, useRouter } from "next/navigation";
import { useCallback, useEffect, useRef, useState, type FC } from "react";
import { ApiError, THREADS_CHANGED, deleteThread, listThreads, renameThread } from "@/lib/api";
import type { ThreadSummary } from "@/lib/types";

const PAGE = 20;

export const Sidebar: FC = () => {
  const pathname = usePathname();
  const router = useRouter();
  const currentId = pathname?.startsWith("/chat/") ? decodeURIComponent(pathname.slice("/chat/".length)) : null;

  const [threads, setThreads] = useState<ThreadSummary[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const [draft, setDraft] = useState("");
  const pagesLoaded = useRef(1);
  const request = useRef(0);

  /** Reloads as many pages as are shown. */
  const refresh = useCallback(async () => {
    const req = ++request.current;
    setLoading(true);
    try {
      let all: ThreadSummary[] = [];
      let next: string | null = null;
      for (let i = 0; i < pagesLoaded.current; i++) {
        const page = await listThreads(PAGE, next);
        all = all.concat(page.threads);
        next = page.next_cursor;
        if (!next) break;
      }
      if (req !== request.current) return;
      setThreads(all);
      setCursor(next);
      setError(null);
    } catch (err) {
      if (req !== request.current) return;
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      if (req === request.current) setLoading(false);
    }
  }, []);

  const loadMore = useCallback(async () => {
    if (!cursor) return;
    const req = ++request.current;
    setLoading(true);
    try {
      const page = await listThreads(PAGE, cursor);
      if (req !== request.current) return;
      pagesLoaded.current++;
      setThreads((prev) => {
        const ids = new Set(prev.map((t) => t.thread_id));
        return prev.concat(page.threads.filter((t) => !ids.has(t.thread_id)));
      });
      setCursor(page.next_cursor);
    } catch (err) {
      if (req === request.current) setError(err instanceof Error ? err.message : String(err));
    } finally {
      if (req === request.current) setLoading(false);
    }
  }, [cursor]);

  useEffect(() => {
    void refresh();
    const onChange = () => void refresh();
    window.addEventListener(THREADS_CHANGED, onChange);
    return () => window.removeEventListener(THREADS_CHANGED, onChange);
  }, [refresh]);

  // A thread opened by URL or just created shows up without waiting for its run.
  useEffect(() => {
    if (currentId && !threads.some((t) => t.thread_id === currentId)) {
      const timer = setTimeout(() => void refresh(), 800);
      return () => clearTimeout(timer);
    }
  }, [currentId, threads, refresh]);

  const startRename = (t: ThreadSummary) => {
    setEditing(t.thread_id);
    setDraft(t.title ?? "");
  };

  const editingRef = useRef<string | null>(null);
  editingRef.current = editing;
  const saveRename = async (threadId: string) => {
    if (editingRef.current !== threadId) return; // already saved (submit, then blur)
    editingRef.current = null;
    const title = draft.trim();
    setEditing(null);
    if (!title) return;
    setThreads((prev) => prev.map((t) => (t.thread_id === threadId ? { ...t, title } : t)));
    try {
      await renameThread(threadId, title);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
    void refresh();
  };

  const remove = async (t: ThreadSummary) => {
    if (!window.confirm(`Delete “${t.title || "Untitled"}” and all its messages?`)) return;
    try {
      await deleteThread(t.thread_id);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) {
        setError(err instanceof Error ? err.message : String(err));
        return;
      }
    }
    setThreads((prev) => prev.filter((x) => x.thread_id !== t.thread_id));
    if (t.thread_id === currentId) router.push("/welcome");
    void refresh();
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
                    if (e.key === "Escape") setEditing(null);
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
        <button type="button" className="button load-more" onClick={() => void loadMore()} disabled={loading}>
          {loading ? "Loading…" : "Load more"}
        </button>
      ) : null}
      {!loading && threads.length === 0 && !error ? <p className="muted small">No conversations yet.</p> : null}
    </nav>
  );
};
