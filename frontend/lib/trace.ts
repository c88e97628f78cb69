// A run's trace (GET …/runs/{run_id}/trace) and its layout as a timeline:
// one row a span, indented under its parent, its bar placed by its start
// and end on the run's time axis, so parallel tool calls show as rows
// whose bars overlap.

import { threadPath } from "./api";

export type TraceSpanStatus = "ok" | "error" | "cancelled" | "interrupted" | "running" | "unanswered";

export type TraceSpan = {
  span_id: string;
  parent_id: string | null;
  name: string;
  operation: "invoke_agent" | "chat" | "execute_tool";
  start: string;
  end: string | null;
  status: TraceSpanStatus;
  error: { type: string; message: string } | null;
  model?: string;
  tool_name?: string;
  tool_call_id?: string;
  input_tokens?: number;
  output_tokens?: number;
  finish_reason?: string;
};

export type RunTrace = { run_id: string; thread_id: string; status: string; spans: TraceSpan[] };

/** GET …/runs/{run_id}/trace. */
export async function getRunTrace(threadId: string, runId: string): Promise<RunTrace> {
  const res = await fetch(`${threadPath(threadId)}/runs/${encodeURIComponent(runId)}/trace`, { cache: "no-store" });
  if (!res.ok) {
    let message = `the trace could not be read (${res.status})`;
    try {
      const body = (await res.json()) as { error?: { message?: string } };
      if (body.error?.message) message = body.error.message;
    } catch {
      // not JSON: the status says it
    }
    throw new Error(message);
  }
  return (await res.json()) as RunTrace;
}

/** One row of the timeline. left and width are percents of the axis. */
export type TraceRow = {
  span: TraceSpan;
  depth: number;
  left: number;
  width: number;
  durationMs: number;
  label: string; // what the row says in words: name, duration, status
};

/** The smallest width of a bar, in percent, so an instant shows. */
const minWidth = 0.6;

/**
 * lays spans out as rows in their order, each under its parent (depth),
 * with bars on one axis from the first start to the last end (now for a
 * span still running).
 */
export function layoutTrace(spans: TraceSpan[], now: number = Date.now()): { rows: TraceRow[]; totalMs: number } {
  if (spans.length === 0) return { rows: [], totalMs: 0 };
  const t = spans.map((s) => {
    const start = Date.parse(s.start);
    const end = s.end ? Date.parse(s.end) : Math.max(now, start);
    return { start, end: Math.max(end, start) };
  });
  const t0 = Math.min(...t.map((x) => x.start));
  const t1 = Math.max(...t.map((x) => x.end));
  const total = Math.max(t1 - t0, 1);
  const depthOf = new Map<string, number>();
  const rows = spans.map((span, i) => {
    const { start, end } = t[i]!;
    const depth = span.parent_id != null ? (depthOf.get(span.parent_id) ?? 0) + 1 : 0;
    depthOf.set(span.span_id, depth);
    const left = ((start - t0) / total) * 100;
    const width = Math.min(Math.max(((end - start) / total) * 100, minWidth), 100 - left);
    const durationMs = end - start;
    return { span, depth, left, width, durationMs, label: rowLabel(span, durationMs) };
  });
  return { rows, totalMs: t1 - t0 };
}

/** A duration in words: "850 ms", "1.2 s", "2 min 5 s". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(ms / 60_000);
  return `${m} min ${Math.round((ms - m * 60_000) / 1000)} s`;
}

/** A count in words with its thousands grouped: "1,234". */
function count(n: number): string {
  return n.toLocaleString("en-US");
}

/**
 * A span's token usage in words ("12 in · 5 out"), or "" when its model
 * reported none: each model call's own, the run's total.
 */
export function tokensText(s: Pick<TraceSpan, "input_tokens" | "output_tokens">): string {
  if (s.input_tokens == null && s.output_tokens == null) return "";
  return `${count(s.input_tokens ?? 0)} in · ${count(s.output_tokens ?? 0)} out`;
}

/**
 * The run's tokens: its span's usage, or the sum of its model calls' when
 * the run span has none; null when no span reported any.
 */
export function traceTokens(spans: TraceSpan[]): { input_tokens: number; output_tokens: number } | null {
  const run = spans.find((s) => s.operation === "invoke_agent");
  if (run && (run.input_tokens != null || run.output_tokens != null)) {
    return { input_tokens: run.input_tokens ?? 0, output_tokens: run.output_tokens ?? 0 };
  }
  const steps = spans.filter((s) => s.operation === "chat" && (s.input_tokens != null || s.output_tokens != null));
  if (steps.length === 0) return null;
  return steps.reduce(
    (t, s) => ({ input_tokens: t.input_tokens + (s.input_tokens ?? 0), output_tokens: t.output_tokens + (s.output_tokens ?? 0) }),
    { input_tokens: 0, output_tokens: 0 },
  );
}

/** A span's status in words. */
export function statusText(s: TraceSpan): string {
  switch (s.status) {
    case "ok":
      return "ok";
    case "error":
      return s.error ? `failed: ${s.error.message || s.error.type}` : "failed";
    case "cancelled":
      return "cancelled";
    case "interrupted":
      return "interrupted";
    case "running":
      return "running";
    case "unanswered":
      return "waiting for an answer";
  }
  return s.status;
}

function rowLabel(s: TraceSpan, ms: number): string {
  const tokens = tokensText(s);
  return `${s.name}, ${s.status === "running" ? "so far " : ""}${formatDuration(ms)}, ${statusText(s)}${tokens ? `, tokens ${tokens}` : ""}`;
}
