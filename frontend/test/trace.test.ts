import { test } from "node:test";
import assert from "node:assert/strict";
import { formatDuration, layoutTrace, statusText, tokensText, traceTokens, type TraceSpan } from "../lib/trace";

const t0 = Date.parse("2026-01-02T03:04:05.000Z");
const at = (ms: number) => new Date(t0 + ms).toISOString();

function span(id: string, parent: string | null, name: string, start: number, end: number | null, status: TraceSpan["status"] = "ok"): TraceSpan {
  const op = id === "run" ? "invoke_agent" : id.startsWith("chat") ? "chat" : "execute_tool";
  return { span_id: id, parent_id: parent, name, operation: op, start: at(start), end: end == null ? null : at(end), status, error: null };
}

test("parallel tool calls get rows of their own whose bars overlap", () => {
  const spans = [
    span("run", null, "invoke_agent threadline", 0, 2000),
    span("chat-1", "run", "chat demo", 0, 200),
    span("tool-a", "chat-1", "execute_tool calculator", 200, 220),
    { ...span("tool-b", "chat-1", "execute_tool clock", 200, 230, "error"), error: { type: "tool_error", message: "unknown time zone" } },
    span("tool-c", "chat-1", "execute_tool wait", 200, 1200),
    span("chat-2", "run", "chat demo", 1200, 2000),
  ];
  const { rows, totalMs } = layoutTrace(spans);
  assert.equal(totalMs, 2000);
  assert.deepEqual(rows.map((r) => r.depth), [0, 1, 2, 2, 2, 1]);
  assert.deepEqual(rows.map((r) => r.left), [0, 0, 10, 10, 10, 60]);
  assert.equal(rows[4]!.width, 50);
  assert.equal(rows[2]!.width, 1); // 20 ms of 2 s
  assert.equal(rows[3]!.label, "execute_tool clock, 30 ms, failed: unknown time zone");
  assert.equal(rows[4]!.label, "execute_tool wait, 1.0 s, ok");
});

test("a running span ends now; an instant still shows; no spans, no rows", () => {
  const { rows } = layoutTrace([span("run", null, "invoke_agent threadline", 0, null, "running"), span("tool-q", "run", "execute_tool ask_user", 0, 0, "unanswered")], t0 + 500);
  assert.equal(rows[0]!.durationMs, 500);
  assert.equal(rows[0]!.label, "invoke_agent threadline, so far 500 ms, running");
  assert.ok(rows[1]!.width > 0);
  assert.equal(statusText(rows[1]!.span), "waiting for an answer");
  assert.deepEqual(layoutTrace([]), { rows: [], totalMs: 0 });
});

test("durations in words", () => {
  assert.equal(formatDuration(12.4), "12 ms");
  assert.equal(formatDuration(1500), "1.5 s");
  assert.equal(formatDuration(125_000), "2 min 5 s");
});

test("each model call's tokens and the run's total", () => {
  const spans = [
    span("run", null, "invoke_agent threadline", 0, 2000),
    { ...span("chat-1", "run", "chat fake", 0, 200), input_tokens: 1200, output_tokens: 8, finish_reason: "tool_call" },
    span("tool-a", "chat-1", "execute_tool calculator", 200, 220),
    { ...span("chat-2", "run", "chat fake", 220, 2000), input_tokens: 35, output_tokens: 4, finish_reason: "stop" },
  ];
  const { rows } = layoutTrace(spans);
  assert.equal(rows[1]!.label, "chat fake, 200 ms, ok, tokens 1,200 in · 8 out");
  assert.equal(tokensText(spans[2]!), "");
  // No run usage: the steps' sum; the run's own when it has it.
  assert.deepEqual(traceTokens(spans), { input_tokens: 1235, output_tokens: 12 });
  assert.deepEqual(traceTokens([{ ...spans[0]!, input_tokens: 7, output_tokens: 9 }, ...spans.slice(1)]), { input_tokens: 7, output_tokens: 9 });
  assert.equal(traceTokens([spans[0]!, spans[2]!]), null);
});
