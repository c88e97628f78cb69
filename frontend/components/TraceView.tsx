"use client";

// "Trace" under a reply: the run behind it as a timeline of its steps (GET
// …/runs/{run_id}/trace) in a modal dialog. One row a span, indented under
// its parent: the run, each model call, each tool call; parallel tool calls
// are rows whose bars overlap. Failures say so in words and in colour.

import { useAuiState } from "@assistant-ui/react";
import { useContext, useEffect, useRef, useState, type FC } from "react";
import { formatDuration, getRunTrace, layoutTrace, statusText, tokensText, traceTokens, type RunTrace } from "@/lib/trace";
import { ThreadIdContext } from "./context";

type TraceState = { kind: "loading" } | { kind: "ready"; trace: RunTrace } | { kind: "error"; message: string };

/** The footer's Trace button: for replies written by a run. */
export const TraceButton: FC = () => {
  const threadId = useContext(ThreadIdContext);
  const runId = useAuiState((s) => {
    const r = s.message.metadata?.custom?.runId;
    return typeof r === "string" ? r : undefined;
  });
  const running = useAuiState((s) => s.message.status?.type === "running");
  const [open, setOpen] = useState(false);
  if (!threadId || !runId || running) return null;
  return (
    <>
      <button type="button" className="link trace-button" aria-haspopup="dialog" onClick={() => setOpen(true)} data-testid="trace-button">
        Trace
      </button>
      {open && <TraceDialog threadId={threadId} runId={runId} onClose={() => setOpen(false)} />}
    </>
  );
};

const TraceDialog: FC<{ threadId: string; runId: string; onClose: () => void }> = ({ threadId, runId, onClose }) => {
  const ref = useRef<HTMLDialogElement>(null);
  const [state, setState] = useState<TraceState>({ kind: "loading" });
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
  }, []);
  useEffect(() => {
    let live = true;
    getRunTrace(threadId, runId).then(
      (trace) => live && setState({ kind: "ready", trace }),
      (err: unknown) => live && setState({ kind: "error", message: err instanceof Error ? err.message : String(err) }),
    );
    return () => {
      live = false;
    };
  }, [threadId, runId]);
  return (
    <dialog
      ref={ref}
      className="trace-dialog"
      aria-labelledby="trace-title"
      data-testid="trace-dialog"
      onClose={onClose}
      onClick={(e) => {
        if (e.target === ref.current) ref.current?.close(); // the backdrop
      }}
    >
      <div className="trace-head">
        <h2 id="trace-title">Trace of this reply</h2>
        <button type="button" className="button" onClick={() => ref.current?.close()} autoFocus>
          Close
        </button>
      </div>
      {state.kind === "loading" && <p role="status">Loading the trace…</p>}
      {state.kind === "error" && (
        <p role="alert" className="trace-failed">
          {state.message}
        </p>
      )}
      {state.kind === "ready" && <Timeline trace={state.trace} />}
    </dialog>
  );
};

const Timeline: FC<{ trace: RunTrace }> = ({ trace }) => {
  const { rows, totalMs } = layoutTrace(trace.spans);
  const failed = rows.filter((r) => r.span.status === "error").length;
  const tools = rows.filter((r) => r.span.operation === "execute_tool").length;
  const steps = rows.filter((r) => r.span.operation === "chat").length;
  const total = traceTokens(trace.spans);
  return (
    <>
      <p className="trace-summary" data-testid="trace-summary">
        {formatDuration(totalMs)} · {steps} model {steps === 1 ? "call" : "calls"} · {tools} tool {tools === 1 ? "call" : "calls"}
        {failed > 0 && <span className="trace-failed"> · {failed} failed</span>}
        {total && <span data-testid="trace-total-tokens"> · tokens {tokensText(total)}</span>}
      </p>
      <div className="trace-rows" role="region" aria-label="Steps of the run" tabIndex={0}>
        <ol className="trace-list">
          {rows.map((r) => (
            <li
              key={r.span.span_id}
              className={`trace-row trace-${r.span.status}`}
              data-testid="trace-row"
              data-span={r.span.span_id}
              data-status={r.span.status}
              data-operation={r.span.operation}
            >
              <div className="trace-label" style={{ paddingInlineStart: `${r.depth * 1}rem` }}>
                <span className="trace-name">{r.span.name}</span>
                <span className="trace-duration">{formatDuration(r.durationMs)}</span>
                <span className="trace-status">{statusText(r.span)}</span>
                {r.span.operation === "chat" && tokensText(r.span) && (
                  <span className="trace-tokens" data-testid="trace-tokens">
                    tokens {tokensText(r.span)}
                    {r.span.finish_reason && ` (${r.span.finish_reason})`}
                  </span>
                )}
              </div>
              <div className="trace-track" aria-hidden="true">
                <div className="trace-bar" data-testid="trace-bar" style={{ left: `${r.left}%`, width: `${r.width}%` }} />
              </div>
            </li>
          ))}
        </ol>
      </div>
    </>
  );
};
