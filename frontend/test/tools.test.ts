import { test } from "node:test";
import assert from "node:assert/strict";
import { CLIENT_TOOLS, continuation, runTools, waitingCalls, type ToolAnswer } from "../lib/tools";
import type { WireMessage } from "../lib/types";

function turn(status: WireMessage["status"]): WireMessage {
  return {
    id: "a1",
    role: "assistant",
    status,
    content: [
      { type: "text", text: "Let me check." },
      { type: "tool-call", toolCallId: "c1", toolName: "calculator", argsText: "{}", result: 2, isError: false },
      { type: "tool-call", toolCallId: "c2", toolName: "delete_file", argsText: '{"path":"x"}' },
      { type: "tool-call", toolCallId: "c3", toolName: "ask_user", argsText: '{"question":"Which?"}' },
    ],
  };
}

const waiting = turn({ type: "requires-action", reason: "tool-calls" });

test("the waiting calls are the unanswered ones of a turn that requires action", () => {
  assert.deepEqual(
    waitingCalls(waiting).map((c) => c.toolCallId),
    ["c2", "c3"],
  );
  assert.deepEqual(waitingCalls(turn({ type: "complete", reason: "stop" })), [], "a finished turn waits for nothing");
});

test("a turn continues once every waiting call has its answer, in one request", () => {
  const answers = new Map<string, ToolAnswer>();
  answers.set("c2", { kind: "approval", toolCallId: "c2", approved: false, reason: "no" });
  assert.equal(continuation(waiting, answers), null, "c3 still waits");
  answers.set("c3", { kind: "result", toolCallId: "c3", result: "the blue one", isError: false });
  answers.set("c1", { kind: "result", toolCallId: "c1", result: 9, isError: false }); // not waiting: ignored
  assert.deepEqual(continuation(waiting, answers), {
    parent_message_id: "a1",
    tool_results: [{ tool_call_id: "c3", result: "the blue one" }],
    approvals: [{ tool_call_id: "c2", approved: false, reason: "no" }],
  });
});

test("a run declares every server tool by name and the app's client tools, or nothing without a tool list", () => {
  assert.equal(runTools(null), undefined);
  assert.deepEqual(runTools(["calculator", "clock"]), ["calculator", "clock", ...CLIENT_TOOLS]);
});
