"use client";

// Search across every message of the caller's threads: a button in the
// sidebar and Ctrl/Cmd-K open a dialog; typing searches (debounced); a
// result opens its thread on that message's branch (see SearchFocus).

import Link from "next/link";
import { useEffect, useRef, useState, useSyncExternalStore, type FC } from "react";
import { createPortal } from "react-dom";
import { segments, resultHref, type SearchResult } from "@/lib/search";
import { searchMessages } from "@/lib/searchApi";
import "./search.css";

type Found = { q: string; results: SearchResult[]; cursor: string | null; error: string | null; loading: boolean };

const NOTHING: Found = { q: "", results: [], cursor: null, error: null, loading: false };

/** Runs the search for q (debounced) and loads more pages on demand. */
function useSearch(q: string) {
  const [found, setFound] = useState<Found>(NOTHING);
  const abort = useRef<AbortController | null>(null);
  const fetchPage = (query: string, cursor: string | null, prev: SearchResult[]) => {
    abort.current?.abort();
    const ac = new AbortController();
    abort.current = ac;
    setFound((f) => ({ ...f, loading: true }));
    searchMessages(query, cursor, ac.signal).then(
      (page) => setFound({ q: query, results: [...prev, ...page.results], cursor: page.next_cursor, error: null, loading: false }),
      (err: unknown) => {
        if (ac.signal.aborted) return;
        setFound({ q: query, results: prev, cursor: null, error: err instanceof Error ? err.message : String(err), loading: false });
      },
    );
  };
  useEffect(() => {
    const query = q.trim();
    if (!query) {
      abort.current?.abort();
      return;
    }
    const t = setTimeout(() => fetchPage(query, null, []), 200);
    return () => clearTimeout(t);
  }, [q]);
  useEffect(() => () => abort.current?.abort(), []);
  // An emptied box shows nothing, whatever a search before it found.
  const shown = q.trim() ? found : NOTHING;
  return { found: shown, more: () => fetchPage(found.q, found.cursor, found.results) };
}

const noSubscribe = () => () => {};

const Snippet: FC<{ r: SearchResult }> = ({ r }) => (
  <span className="search-snippet">
    {segments(r.snippet, r.highlights).map((s, i) => (s.mark ? <mark key={i}>{s.text}</mark> : <span key={i}>{s.text}</span>))}
  </span>
);

export const SearchBox: FC = () => {
  const dialog = useRef<HTMLDialogElement>(null);
  const input = useRef<HTMLInputElement>(null);
  const list = useRef<HTMLUListElement>(null);
  const [q, setQ] = useState("");
  // The dialog is portalled to <body>, which exists only in the browser.
  const mounted = useSyncExternalStore(noSubscribe, () => true, () => false);
  const { found, more } = useSearch(q);

  const open = () => {
    const d = dialog.current;
    if (!d) return;
    if (!d.open) d.showModal();
    input.current?.focus();
    input.current?.select();
  };
  const close = () => dialog.current?.close();

  // Ctrl-K (Cmd-K on a Mac) opens the search from anywhere.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if ((e.ctrlKey || e.metaKey) && !e.altKey && e.key.toLowerCase() === "k") {
        e.preventDefault();
        open();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  // Arrow keys move between the input and the results.
  const onKeyDown = (e: React.KeyboardEvent) => {
    if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
    const links = Array.from(list.current?.querySelectorAll<HTMLAnchorElement>("a") ?? []);
    const at = links.indexOf(document.activeElement as HTMLAnchorElement);
    const next = e.key === "ArrowDown" ? at + 1 : at - 1;
    e.preventDefault();
    if (next < 0) input.current?.focus();
    else links[Math.min(next, links.length - 1)]?.focus();
  };

  const status = found.error
    ? null
    : q.trim() === ""
      ? "Search every message of every thread."
      : found.loading && found.results.length === 0
        ? "Searching…"
        : found.q && found.results.length === 0
          ? "No messages found."
          : found.q
            ? `${found.results.length}${found.cursor ? "+" : ""} found`
            : "Searching…";

  return (
    <>
      <button type="button" className="button search-open" data-testid="search-open" onClick={open} aria-keyshortcuts="Control+K Meta+K">
        Search <kbd>Ctrl K</kbd>
      </button>
      {mounted
        ? createPortal(
            <dialog
              ref={dialog}
              className="search-dialog"
              aria-label="Search messages"
              data-testid="search-dialog"
              onClick={(e) => {
                if (e.target === dialog.current) close(); // the backdrop
              }}
              onKeyDown={onKeyDown}
            >
              <form
                className="search-form"
                role="search"
                onSubmit={(e) => {
                  e.preventDefault();
                  list.current?.querySelector<HTMLAnchorElement>("a")?.click();
                }}
              >
                <input
                  ref={input}
                  type="text"
                  enterKeyHint="search"
                  className="search-input"
                  data-testid="search-input"
                  aria-label="Search messages"
                  placeholder='Search messages: words, "a phrase", prefix*, names'
                  maxLength={256}
                  value={q}
                  onChange={(e) => setQ(e.target.value)}
                  aria-controls="search-results"
                />
                <button type="button" className="button" onClick={close}>
                  Close
                </button>
              </form>
              <p className="search-status muted small" role="status" aria-live="polite">
                {status}
              </p>
              {found.error ? (
                <p className="search-error" role="alert">
                  {found.error}
                </p>
              ) : null}
              <ul id="search-results" ref={list} className="search-results" data-testid="search-results" aria-label="Search results">
                {found.results.map((r) => (
                  <li key={`${r.thread_id}/${r.message_id}`}>
                    <Link href={resultHref(r)} className="search-result" data-testid="search-result" data-message-id={r.message_id} onClick={close}>
                      <span className="search-result-head">
                        <span className="search-result-title">{r.thread_title || "Untitled"}</span>
                        <span className="muted small">
                          {r.role === "user" ? "You" : "Assistant"} · {new Date(r.created_at).toLocaleString()}
                        </span>
                      </span>
                      <Snippet r={r} />
                    </Link>
                  </li>
                ))}
              </ul>
              {found.cursor ? (
                <button type="button" className="button load-more" onClick={more} disabled={found.loading}>
                  {found.loading ? "Loading…" : "More results"}
                </button>
              ) : null}
            </dialog>,
            document.body,
          )
        : null}
    </>
  );
};
