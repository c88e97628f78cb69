import { test } from "node:test";
import assert from "node:assert/strict";
import { chatReducer, initialChatState, isRunning, messageText, visiblePath, type ChatState } from "../lib/reducer";
import type { RunEvent, SnapshotEvent, ThreadSnapshot, WireMessage, WireRepository } from "../lib/types";

const T = "00000000-0000-4000-8000-000000000000";

function user(id: string, text: string, runId: string): WireMessage {
  return {
    id,
    role: "user",
    content: [{ type: "text", text }],
    createdAt: "2026-11-22T10:00:00Z",
    attachments: [],
    metadata: { runId, custom: { checkpointId: id, parentCheckpointId: null, runId } },
  };
}

function assistant(id: string, text: string, runId: string, status: WireMessage["status"]): WireMessage {
  return {
    id,
    role: "assistant",
    content: [{ type: "text", text }],
    createdAt: "2026-11-22T10:00:01Z",
    status,
    metadata: { runId, custom: { checkpointId: status?.type === "running" ? null : id, runId } },
  };
}

function repo(items: [WireMessage, string | null][], headId: string): WireRepository {
  return { headId, messages: items.map(([message, parentId]) => ({ message, parentId })) };
}

function snapshot(runId: string, sequence: number, repository: WireRepository, runStatus: SnapshotEvent["run_status"], withRepo = true): SnapshotEvent {
  const path = visiblePath(repository);
  return {
    type: "snapshot",
    run_id: runId,
    sequence,
    thread_id: T,
    checkpoint_id: null,
    run_status: runStatus,
    messages: path,
    ...(withRepo ? { messageRepository: repository } : {}),
  };
}

function token(runId: string, sequence: number, messageId: string, text: string): RunEvent {
  return { type: "token", run_id: runId, sequence, message_id: messageId, text };
}

function fold(state: ChatState, events: RunEvent[]): ChatState {
  return events.reduce((s, event) => chatReducer(s, { type: "event", event }), state);
}

function textOf(state: ChatState, id: string): string {
  const m = state.repository.messages.find((x) => x.message.id === id);
  assert.ok(m, `message ${id} present`);
  return messageText(m.message);
}

const u1 = user("u1", "Hello", "r1");
const a1Running = assistant("a1", "", "r1", { type: "running" });
const first = snapshot("r1", 1, repo([[u1, null], [a1Running, "u1"]], "a1"), "running");

test("tokens extend the message they name, in order", () => {
  const s = fold(initialChatState, [first, token("r1", 2, "a1", "Hel"), token("r1", 3, "a1", "lo")]);
  assert.equal(textOf(s, "a1"), "Hello");
  assert.equal(s.run?.lastSequence, 3);
  assert.equal(isRunning(s), true);
  assert.equal(s.repository.headId, "a1");
});

test("a token never touches another message, nor a message it does not name", () => {
  const s = fold(initialChatState, [
    first,
    token("r1", 2, "u1", "X"), // a user message: not extended
    token("r1", 3, "nope", "Y"), // unknown message
    token("r1", 4, "a1", "ok"),
  ]);
  assert.equal(textOf(s, "u1"), "Hello");
  assert.equal(textOf(s, "a1"), "ok");
});

test("duplicate and out-of-order events (sequence <= last seen) are dropped", () => {
  const s = fold(initialChatState, [
    first,
    token("r1", 2, "a1", "A"),
    token("r1", 3, "a1", "B"),
    token("r1", 2, "a1", "A"), // replayed
    token("r1", 3, "a1", "B"), // replayed
    token("r1", 1, "a1", "?"), // older than anything
    token("r1", 4, "a1", "C"),
    token("r1", 3, "a1", "late"), // arrived after 4
  ]);
  assert.equal(textOf(s, "a1"), "ABC");
  assert.equal(s.run?.lastSequence, 4);
});

test("a replayed first snapshot does not reset streamed text", () => {
  const s = fold(initialChatState, [first, token("r1", 2, "a1", "Hi"), first]);
  assert.equal(textOf(s, "a1"), "Hi");
});

test("events of an older run are dropped once a newer run started", () => {
  const a1Done = assistant("a1", "first reply", "r1", { type: "complete", reason: "stop" });
  const final1 = snapshot("r1", 3, repo([[u1, null], [a1Done, "u1"]], "a1"), "succeeded");
  const a2 = assistant("a2", "", "r2", { type: "running" });
  const start2 = snapshot("r2", 1, repo([[u1, null], [a1Done, "u1"], [a2, "u1"]], "a2"), "running");
  let s = fold(initialChatState, [first, token("r1", 2, "a1", "first reply"), final1, start2]);
  assert.equal(s.run?.id, "r2");
  assert.ok(s.retiredRuns.includes("r1"));
  // Late events of r1, even with higher sequences, change nothing.
  const before = s;
  s = fold(s, [
    token("r1", 4, "a1", " more"),
    snapshot("r1", 5, repo([[u1, null], [a1Done, "u1"]], "a1"), "succeeded"),
    { type: "error", run_id: "r1", sequence: 6, code: "model_error", error: "late" },
  ]);
  assert.equal(s, before);
  s = fold(s, [token("r2", 2, "a2", "second")]);
  assert.equal(textOf(s, "a2"), "second");
  assert.equal(textOf(s, "a1"), "first reply");
  assert.equal(s.repository.headId, "a2");
});

test("tokens and errors of a run never introduced by a snapshot are dropped", () => {
  const s = fold(initialChatState, [
    token("rX", 2, "a1", "ghost"),
    { type: "error", run_id: "rX", sequence: 3, code: "model_error", error: "ghost" },
  ]);
  assert.deepEqual(s, initialChatState);
});

test("an error event marks the running message and records code and text", () => {
  const s = fold(initialChatState, [
    first,
    token("r1", 2, "a1", "partial"),
    {
      type: "error",
      run_id: "r1",
      sequence: 3,
      code: "model_not_configured",
      error: "model openai is not configured: set OPENAI_API_KEY",
    },
  ]);
  assert.deepEqual(s.errors["r1"], {
    code: "model_not_configured",
    message: "model openai is not configured: set OPENAI_API_KEY",
  });
  const a1 = s.repository.messages.find((m) => m.message.id === "a1")!.message;
  assert.equal(a1.status?.type, "incomplete");
  assert.equal(messageText(a1), "partial");
  // Tokens after the error do not extend a message that is no longer running.
  const s2 = fold(s, [token("r1", 4, "a1", "more")]);
  assert.equal(textOf(s2, "a1"), "partial");
});

test("the final snapshot is authoritative and ends the run", () => {
  const a1Final = assistant("a1", "The real text.", "r1", { type: "complete", reason: "stop" });
  const final = snapshot("r1", 5, repo([[u1, null], [a1Final, "u1"]], "a1"), "succeeded");
  let s = fold(initialChatState, [first, token("r1", 2, "a1", "The "), token("r1", 4, "a1", "wrong")]);
  assert.equal(textOf(s, "a1"), "The wrong"); // sequence 3 lost
  s = fold(s, [final]);
  assert.equal(textOf(s, "a1"), "The real text.");
  assert.equal(s.run?.status, "succeeded");
  assert.equal(isRunning(s), false);
  // Nothing after the final snapshot counts, whatever its sequence.
  const after = fold(s, [token("r1", 6, "a1", "!"), snapshot("r1", 7, repo([[u1, null]], "u1"), "running")]);
  assert.equal(after, s);
});

test("a failed run's final snapshot keeps the error event's code", () => {
  const a1Failed = assistant("a1", "", "r1", { type: "incomplete", reason: "error", error: "set OPENAI_API_KEY" });
  const s = fold(initialChatState, [
    first,
    { type: "error", run_id: "r1", sequence: 2, code: "model_not_configured", error: "set OPENAI_API_KEY" },
    snapshot("r1", 3, repo([[u1, null], [a1Failed, "u1"]], "a1"), "failed"),
  ]);
  assert.equal(s.run?.status, "failed");
  assert.equal(s.errors["r1"]?.code, "model_not_configured");
  assert.equal(isRunning(s), false);
});

test("a run whose thread was deleted ends with its not_found error: the page says so, nothing later counts", () => {
  const s = fold(initialChatState, [
    first,
    token("r1", 2, "a1", "Hel"),
    { type: "error", run_id: "r1", sequence: 3, code: "not_found", error: "the thread was deleted: this run and its events are gone" },
  ]);
  assert.equal(s.deleted, true);
  assert.deepEqual(s.notice, { code: "not_found", message: "This conversation was deleted." });
  assert.equal(isRunning(s), false);
  assert.equal(s.pending, false);
  assert.equal(textOf(s, "a1"), "Hel");
  const after = fold(s, [token("r1", 4, "a1", "lo"), snapshot("r1", 5, repo([[u1, null]], "u1"), "running")]);
  assert.equal(after, s);
  // Another run's error is not a deletion.
  const failed = fold(initialChatState, [first, { type: "error", run_id: "r1", sequence: 2, code: "model_error", error: "boom" }]);
  assert.equal(failed.deleted, false);
});

test("an interim snapshot without messageRepository updates the path it carries", () => {
  const a1Mid = assistant("a1", "Hello wor", "r1", { type: "running" });
  const interim = snapshot("r1", 4, repo([[u1, null], [a1Mid, "u1"]], "a1"), "running", false);
  assert.equal(interim.messageRepository, undefined);
  const s = fold(initialChatState, [first, token("r1", 2, "a1", "Hel"), token("r1", 3, "a1", "lo"), interim, token("r1", 5, "a1", "ld")]);
  assert.equal(textOf(s, "a1"), "Hello world");
  assert.equal(s.repository.messages.length, 2);
});

test("rejoin: a loaded snapshot's active_run sequence is the floor for its events", () => {
  const a1Partial = assistant("a1", "Hello", "r1", { type: "running" });
  const loaded: ThreadSnapshot = {
    thread_id: T,
    checkpoint_id: "u1",
    messages: [u1, a1Partial],
    messageRepository: repo([[u1, null], [a1Partial, "u1"]], "a1"),
    active_run: { run_id: "r1", message_id: "a1", sequence: 3 },
  };
  let s = chatReducer(initialChatState, { type: "load", snapshot: loaded });
  assert.equal(isRunning(s), true);
  assert.equal(s.run?.lastSequence, 3);
  // The rejoined stream starts after 3; a server that replays 3 again is ignored.
  s = fold(s, [token("r1", 3, "a1", "lo"), token("r1", 4, "a1", " again")]);
  assert.equal(textOf(s, "a1"), "Hello again");
});

test("optimistic user message is replaced by the first snapshot; a refused request removes it", () => {
  const optimistic = user("u1", "Hello", "");
  let s = chatReducer(initialChatState, { type: "request", message: optimistic, parentId: null });
  assert.equal(isRunning(s), true);
  assert.equal(s.repository.headId, "u1");
  const refused = chatReducer(s, { type: "request_failed", messageId: "u1", error: { code: "run_in_progress", message: "busy" } });
  assert.equal(refused.repository.messages.length, 0);
  assert.equal(refused.notice?.code, "run_in_progress");
  assert.equal(isRunning(refused), false);
  s = fold(s, [first]);
  assert.equal(s.pending, false);
  assert.equal(s.repository.headId, "a1");
  assert.equal(s.repository.messages.length, 2);
});

test("set_head switches the shown branch, only to a known message", () => {
  const a1 = assistant("a1", "one", "r1", { type: "complete", reason: "stop" });
  const a2 = assistant("a2", "two", "r2", { type: "complete", reason: "stop" });
  const loaded: ThreadSnapshot = {
    thread_id: T,
    checkpoint_id: "a2",
    messages: [u1, a2],
    messageRepository: repo([[u1, null], [a1, "u1"], [a2, "u1"]], "a2"),
    active_run: null,
  };
  let s = chatReducer(initialChatState, { type: "load", snapshot: loaded });
  s = chatReducer(s, { type: "set_head", headId: "a1" });
  assert.deepEqual(visiblePath(s.repository).map((m) => m.id), ["u1", "a1"]);
  assert.equal(chatReducer(s, { type: "set_head", headId: "zzz" }), s);
});

test("a refused regenerate or edit brings back the branch that was shown", () => {
  const a1 = assistant("a1", "one", "r1", { type: "complete", reason: "stop" });
  const loaded: ThreadSnapshot = {
    thread_id: T,
    checkpoint_id: "a1",
    messages: [u1, a1],
    messageRepository: repo([[u1, null], [a1, "u1"]], "a1"),
    active_run: null,
  };
  const s0 = chatReducer(initialChatState, { type: "load", snapshot: loaded });
  // Regenerate: the view moves to the user message while the request is out.
  const regen = chatReducer(s0, { type: "request", parentId: "u1", headId: "u1" });
  assert.equal(regen.repository.headId, "u1");
  const back = chatReducer(regen, { type: "request_failed", error: null, restoreHeadId: "a1" });
  assert.equal(back.repository.headId, "a1");
  assert.equal(back.notice, null);
  // Edit: an optimistic sibling of u1 is shown, then taken back.
  const edit = chatReducer(s0, { type: "request", message: user("u2", "edited", ""), parentId: null });
  assert.deepEqual(visiblePath(edit.repository).map((m) => m.id), ["u2"]);
  const undone = chatReducer(edit, {
    type: "request_failed",
    messageId: "u2",
    restoreHeadId: "a1",
    error: { code: "invalid_fork", message: "no" },
  });
  assert.deepEqual(visiblePath(undone.repository).map((m) => m.id), ["u1", "a1"]);
  assert.equal(undone.repository.messages.length, 2);
});

test("a refused send's Retry notice outlives the snapshots of another run; the next request clears it", () => {
  const optimistic = user("u9", "Later", "");
  let s = chatReducer(initialChatState, { type: "request", message: optimistic, parentId: null });
  s = chatReducer(s, { type: "request_failed", messageId: "u9", error: { code: "run_in_progress", message: "busy", retry: true } });
  s = fold(s, [first]); // the other tab's run, shown meanwhile
  assert.equal(s.notice?.retry, true, `got notice ${JSON.stringify(s.notice)}, want the Retry notice`);
  const other = chatReducer(initialChatState, { type: "notice", error: { code: "x", message: "plain" } });
  assert.equal(fold(other, [first]).notice, null, "a plain notice ends with a snapshot");
  s = chatReducer(s, { type: "request", message: optimistic, parentId: null });
  assert.equal(s.notice, null);
});

// Agent runs (API.md, "Agent runs").

function agentEvent(e: Record<string, unknown>): RunEvent {
  return { run_id: "r1", message_id: "a1", ...e } as unknown as RunEvent;
}

function partsOf(state: ChatState, id: string): unknown[] {
  const m = state.repository.messages.find((x) => x.message.id === id);
  assert.ok(m, `message ${id} present`);
  return m.message.content;
}

test("agent events build one assistant message: reasoning, a streamed tool call, its result, data, text", () => {
  const s = fold(initialChatState, [
    first,
    agentEvent({ type: "reasoning", sequence: 2, text: "Let me " }),
    agentEvent({ type: "reasoning", sequence: 3, text: "compute." }),
    agentEvent({ type: "tool_call", sequence: 4, tool_call_id: "c1", tool_name: "calculator", args_text: '{"expression":' }),
    agentEvent({ type: "tool_call", sequence: 5, tool_call_id: "c1", tool_name: "calculator", args_text: '"12*7"}' }),
    agentEvent({ type: "tool_result", sequence: 6, tool_call_id: "c1", result: 84, is_error: false }),
    agentEvent({ type: "data", sequence: 7, name: "plan", data: { tasks: [] } }),
    token("r1", 8, "a1", "It is 84."),
  ]);
  assert.deepEqual(partsOf(s, "a1"), [
    { type: "reasoning", text: "Let me compute." },
    {
      type: "tool-call",
      toolCallId: "c1",
      toolName: "calculator",
      argsText: '{"expression":"12*7"}',
      args: { expression: "12*7" },
      result: 84,
      isError: false,
    },
    { type: "data", name: "plan", data: { tasks: [] } },
    { type: "text", text: "It is 84." },
  ]);
  assert.equal(s.run?.lastSequence, 8);
});

test("a partial tool call has its argsText and no args; a result for an unknown call is dropped", () => {
  const s = fold(initialChatState, [
    first,
    agentEvent({ type: "tool_call", sequence: 2, tool_call_id: "c1", tool_name: "clock", args_text: '{"tz":' }),
    agentEvent({ type: "tool_result", sequence: 3, tool_call_id: "nope", result: "x" }),
  ]);
  assert.deepEqual(partsOf(s, "a1"), [{ type: "tool-call", toolCallId: "c1", toolName: "clock", argsText: '{"tz":' }]);
  assert.equal(s.run?.lastSequence, 3, "the dropped event's sequence is consumed");
});

test("agent events replayed after they were applied change nothing", () => {
  const events = [
    first,
    agentEvent({ type: "tool_call", sequence: 2, tool_call_id: "c1", tool_name: "calculator", args_text: "{}" }),
    agentEvent({ type: "tool_result", sequence: 3, tool_call_id: "c1", result: 1 }),
  ];
  const once = fold(initialChatState, events);
  const twice = fold(once, events.slice(1));
  assert.deepEqual(partsOf(twice, "a1"), partsOf(once, "a1"));
});

test("answer_refused counts the refusals of a waiting turn's answers, with the last one's words", () => {
  let s: ChatState = initialChatState;
  s = chatReducer(s, { type: "answer_refused", messageId: "a1", message: "first" });
  assert.deepEqual(s.refusals, { a1: { n: 1, message: "first" } });
  s = chatReducer(s, { type: "answer_refused", messageId: "a1", message: "again" });
  s = chatReducer(s, { type: "answer_refused", messageId: "a2", message: "other" });
  assert.deepEqual(s.refusals, { a1: { n: 2, message: "again" }, a2: { n: 1, message: "other" } });
});
