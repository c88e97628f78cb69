"use client";

// The library's buttons: "Export" of a thread (JSON or Markdown downloads of
// GET /threads/{id}/export) and "Import…" of an export file (POST
// /threads/import), which opens the first imported thread.

import { useRouter } from "next/navigation";
import { useRef, useState, type FC } from "react";
import { announceThreadsChanged, exportUrl, importThreads } from "@/lib/api";
import { describeError } from "@/lib/errors";

/** A menu of download links; <details> keeps it keyboard-usable without script. */
export const ExportMenu: FC<{ threadId: string }> = ({ threadId }) => (
  <details className="export-menu" data-testid="export-menu">
    <summary className="button">Export</summary>
    <div className="export-menu-items" role="group" aria-label="Export this conversation">
      <a className="button" href={exportUrl(threadId, "json")} download data-testid="export-json">
        JSON
      </a>
      <a className="button" href={exportUrl(threadId, "markdown")} download data-testid="export-markdown">
        Markdown
      </a>
    </div>
  </details>
);

/** Picks an export file, uploads it, and opens the first thread it made. */
export const ImportButton: FC<{ onDone?: () => void }> = ({ onDone }) => {
  const router = useRouter();
  const input = useRef<HTMLInputElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const upload = async (file: File) => {
    setBusy(true);
    setError(null);
    try {
      const threads = await importThreads(file);
      announceThreadsChanged();
      onDone?.();
      const first = threads[0];
      if (first) router.push(`/chat/${first.thread_id}`);
      else setError("The file held no conversations.");
    } catch (err) {
      setError(`Import failed: ${describeError(err).message}`);
    } finally {
      setBusy(false);
      if (input.current) input.current.value = "";
    }
  };
  return (
    <div className="import">
      <input
        ref={input}
        type="file"
        accept=".json,.md,.markdown,application/json,text/markdown"
        hidden
        data-testid="import-file"
        onChange={(e) => {
          const file = e.target.files?.[0];
          if (file) void upload(file);
        }}
      />
      <button type="button" className="button import-button" disabled={busy} onClick={() => input.current?.click()}>
        {busy ? "Importing…" : "Import…"}
      </button>
      {error ? (
        <p className="sidebar-error" role="alert" data-testid="import-error">
          {error}
        </p>
      ) : null}
    </div>
  );
};
