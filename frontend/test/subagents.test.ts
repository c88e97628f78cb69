import { test } from "node:test";
import assert from "node:assert/strict";
import { chatReducer, initialChatState, messageText, subagentKey, visiblePath, type ChatState } from "../lib/reducer";
import { delegateArgs, subagentStatus } from "../lib/subagents";
import type { RunEvent, SnapshotEvent, ThreadSnapshot, WireMessage, WireRepository, WireToolCallPart } from "../lib/types";

const PARENT = "00000000-0000-4000-8000-000000000001";
const CHILD = "00000000-0000-4000-8000-000000000002";

function msg(id: string, role: "user" | "assistant", runId: string, content: WireMessage["content"], status?: WireMessage["status"]): WireMessage {
  return { id, role, content, createdAt: "2026-11-27T10:00:00Z", ...(status ? { status } : {}), metadata: { runId, custom: { runId } } };
}

function snap(runId: string, sequence: number, threadId: string, path: WireMessage[], runStatus: SnapshotEvent["run_status"]): SnapshotEvent {
  const repository: WireRepository = {
    headId: path.at(-1)!.id,
    messages: path.map((message, i) => ({ message, parentId: i === 0 ? null : path[i - 1]!.id })),
  };
  return { type: "snapshot", run_id: runId, sequence, thread_id: threadId, checkpoint_id: null, run_status: runStatus, messages: path, messageRepository: repository };
}

const call = (id: string, args: object): WireToolCallPart => ({ type: "tool-call", toolCallId: id, toolName: "delegate", argsText: JSON.stringify(args), args: args as Record<string, unknown> });

/** A parent turn "pr" whose reply "pa" made delegate call c1. */
function setup(): ChatState {
  const path = [
    msg("pu", "user", "pr", [{ type: "text", text: "research three options in parallel" }]),
    msg("pa", "assistant", "pr", [call("c1", { task: "look at A", title: "Option A" })], { type: "running" }),
  ];
  return chatReducer(initialChatState, { type: "event", event: snap("pr", 1, PARENT, path, "running") });
}

function sub(sequence: number, event: RunEvent, toolCallId = "c1", childRun = "cr"): RunEvent {
  return { type: "subagent", run_id: "pr", sequence, message_id: "pa", tool_call_id: toolCallId, thread_id: CHILD, child_run_id: childRun, event };
}

const childPath = (text: string, status: WireMessage["status"]) => [
  msg("cu", "user", "cr", [{ type: "text", text: "look at A" }]),
  msg("ca", "assistant", "cr", text ? [{ type: "text", text }] : [], status),
];

function fold(state: ChatState, events: RunEvent[]): ChatState {
  return events.reduce((s, event) => chatReducer(s, { type: "event", event }), state);
}

function childText(state: ChatState, key = subagentKey("pa", "c1")): string {
  const s = state.subagents[key];
  assert.ok(s, "sub-agent state present");
  return messageText(visiblePath(s.chat.repository).at(-1)!);
}

test("subagent events fold into the call's child state with the same reducer", () => {
  const s = fold(setup(), [
    sub(2, snap("cr", 1, CHILD, childPath("", { type: "running" }), "running")),
    sub(3, { type: "token", run_id: "cr", sequence: 2, message_id: "ca", text: "A is " }),
    sub(4, { type: "token", run_id: "cr", sequence: 3, message_id: "ca", text: "cheap." }),
  ]);
  assert.equal(childText(s), "A is cheap.");
  const child = s.subagents[subagentKey("pa", "c1")]!;
  assert.equal(child.threadId, CHILD);
  assert.equal(child.runId, "cr");
  assert.equal(child.chat.run?.status, "running");
  assert.equal(s.run?.lastSequence, 4, "the parent run's sequence moves on");
  // The parent's call now says where its child lives.
  const part = visiblePath(s.repository).at(-1)!.content[0] as WireToolCallPart;
  assert.deepEqual(part.subagent, { thread_id: CHILD, run_id: "cr" });
});

test("a duplicate parent sequence is dropped, and so is a child event at or below the child's last sequence", () => {
  const first = fold(setup(), [
    sub(2, snap("cr", 1, CHILD, childPath("", { type: "running" }), "running")),
    sub(3, { type: "token", run_id: "cr", sequence: 2, message_id: "ca", text: "one" }),
  ]);
  const dupParent = fold(first, [sub(3, { type: "token", run_id: "cr", sequence: 3, message_id: "ca", text: "X" })]);
  assert.equal(childText(dupParent), "one");
  const dupChild = fold(first, [sub(5, { type: "token", run_id: "cr", sequence: 2, message_id: "ca", text: "X" })]);
  assert.equal(childText(dupChild), "one");
  assert.equal(dupChild.run?.lastSequence, 5);
});

test("a child token before the child's snapshot is dropped; the final child snapshot settles it", () => {
  const s = fold(setup(), [
    sub(2, { type: "token", run_id: "cr", sequence: 2, message_id: "ca", text: "lost" }),
    sub(3, snap("cr", 5, CHILD, childPath("A is cheap.", { type: "complete", reason: "stop" }), "succeeded")),
    sub(4, { type: "token", run_id: "cr", sequence: 6, message_id: "ca", text: " late" }),
  ]);
  assert.equal(childText(s), "A is cheap.");
  assert.equal(s.subagents[subagentKey("pa", "c1")]!.chat.run?.status, "succeeded");
});

test("three calls keep three children apart", () => {
  const path = [
    msg("pu", "user", "pr", [{ type: "text", text: "go" }]),
    msg("pa", "assistant", "pr", [call("c1", { task: "a" }), call("c2", { task: "b" }), call("c3", { task: "c" })], { type: "running" }),
  ];
  let s = chatReducer(initialChatState, { type: "event", event: snap("pr", 1, PARENT, path, "running") });
  let seq = 2;
  for (const id of ["c1", "c2", "c3"]) {
    const run = `cr-${id}`;
    const cp = [msg(`u-${id}`, "user", run, [{ type: "text", text: id }]), msg(`a-${id}`, "assistant", run, [], { type: "running" })];
    s = fold(s, [
      sub(seq++, snap(run, 1, CHILD, cp, "running"), id, run),
      sub(seq++, { type: "token", run_id: run, sequence: 2, message_id: `a-${id}`, text: `answer ${id}` }, id, run),
    ]);
  }
  for (const id of ["c1", "c2", "c3"]) assert.equal(childText(s, subagentKey("pa", id)), `answer ${id}`);
});

test("subagent events after the parent's final snapshot are dropped", () => {
  const done = [
    msg("pu", "user", "pr", [{ type: "text", text: "go" }]),
    msg("pa", "assistant", "pr", [{ ...call("c1", { task: "a" }), result: "cancelled", isError: true }], { type: "incomplete", reason: "cancelled" }),
  ];
  const s = fold(setup(), [snap("pr", 2, PARENT, done, "cancelled"), sub(3, snap("cr", 1, CHILD, childPath("", { type: "running" }), "running"))]);
  assert.equal(s.subagents[subagentKey("pa", "c1")], undefined);
});

test("subagent_load gives a reloaded page the child, and live events continue after its active run's sequence", () => {
  const childSnapshot: ThreadSnapshot = {
    thread_id: CHILD,
    checkpoint_id: null,
    messages: childPath("A is", { type: "running" }),
    messageRepository: snap("cr", 4, CHILD, childPath("A is", { type: "running" }), "running").messageRepository!,
    active_run: { run_id: "cr", message_id: "ca", sequence: 4 },
  };
  let s = chatReducer(setup(), { type: "subagent_load", messageId: "pa", toolCallId: "c1", threadId: CHILD, runId: "cr", snapshot: childSnapshot });
  assert.equal(childText(s), "A is");
  s = fold(s, [
    sub(2, { type: "token", run_id: "cr", sequence: 4, message_id: "ca", text: " (already in)" }),
    sub(3, { type: "token", run_id: "cr", sequence: 5, message_id: "ca", text: " cheap." }),
  ]);
  assert.equal(childText(s), "A is cheap.");
});

test("malformed subagent events change nothing", () => {
  const base = setup();
  const bad = [
    { ...sub(2, snap("cr", 1, CHILD, childPath("", { type: "running" }), "running")), tool_call_id: 7 },
    { ...sub(2, snap("cr", 1, CHILD, childPath("", { type: "running" }), "running")), event: null },
  ] as unknown as RunEvent[];
  for (const e of bad) assert.deepEqual(chatReducer(base, { type: "event", event: e }).subagents, {});
});

test("subagentStatus says what the card shows", () => {
  const running = { type: "running" };
  const cases: [string, Parameters<typeof subagentStatus>[0], ReturnType<typeof subagentStatus>][] = [
    ["streaming", { result: undefined, parent: running, child: running }, "running"],
    ["started, child not loaded", { result: undefined, parent: running, child: null }, "running"],
    ["child done before the parent saw the result", { result: undefined, parent: running, child: { type: "complete" } }, "succeeded"],
    ["result", { result: "A is cheap.", isError: false, parent: { type: "complete" }, child: null }, "succeeded"],
    ["child failed", { result: "boom", isError: true, parent: running, child: { type: "incomplete", reason: "error" } }, "failed"],
    ["child cancelled", { result: "x", isError: true, parent: running, child: { type: "incomplete", reason: "cancelled" } }, "cancelled"],
    ["error result without the child", { result: "the model failed", isError: true, parent: { type: "complete" }, child: null }, "failed"],
    ["cancel result without the child", { result: "sub-agent cancelled", isError: true, parent: { type: "complete" }, child: null }, "cancelled"],
    ["parent stopped, no result", { result: undefined, parent: { type: "incomplete", reason: "cancelled" }, child: running }, "cancelled"],
    ["parent failed, no result", { result: undefined, parent: { type: "incomplete", reason: "error" }, child: null }, "failed"],
  ];
  for (const [name, input, want] of cases) assert.equal(subagentStatus(input), want, name);
});

test("delegateArgs takes the title, else the task's first line", () => {
  assert.deepEqual(delegateArgs({ task: "look at A\nin depth", title: "Option A" }), { task: "look at A\nin depth", title: "Option A" });
  assert.deepEqual(delegateArgs({ task: "look at A\nin depth" }), { task: "look at A\nin depth", title: "look at A" });
  assert.deepEqual(delegateArgs(undefined), { task: "", title: "Sub-agent" });
});

test("convert gives a delegate call its child's conversation as messages, and the message where the child lives", async () => {
  const { toExportedRepository } = await import("../lib/convert");
  const s = fold(setup(), [
    sub(2, snap("cr", 1, CHILD, childPath("", { type: "running" }), "running")),
    sub(3, { type: "token", run_id: "cr", sequence: 2, message_id: "ca", text: "A is cheap." }),
  ]);
  const first = toExportedRepository(s.repository, s.errors, s.refusals, s.subagents);
  const pa = first.messages.find((m) => m.message.id === "pa")!.message;
  const part = pa.content.find((p) => p.type === "tool-call");
  assert.ok(part && part.type === "tool-call");
  assert.deepEqual(part.messages?.map((m) => [m.role, m.content.map((c) => (c.type === "text" ? c.text : c.type)).join("")]), [
    ["user", "look at A"],
    ["assistant", "A is cheap."],
  ]);
  assert.equal(part.messages?.at(-1)?.status?.type, "running");
  assert.deepEqual((pa.metadata.custom as { subagents?: unknown }).subagents, { c1: { thread_id: CHILD, run_id: "cr" } });
  // Another child token: the parent message is converted again, with the new text.
  const s2 = fold(s, [sub(4, { type: "token", run_id: "cr", sequence: 3, message_id: "ca", text: " Fast too." })]);
  const second = toExportedRepository(s2.repository, s2.errors, s2.refusals, s2.subagents);
  const pa2 = second.messages.find((m) => m.message.id === "pa")!.message;
  const part2 = pa2.content.find((p) => p.type === "tool-call");
  assert.ok(part2 && part2.type === "tool-call");
  const last = part2.messages?.at(-1)?.content[0];
  assert.equal(last?.type === "text" ? last.text : "", "A is cheap. Fast too.");
  // Nothing changed: the same converted object (no re-render).
  const third = toExportedRepository(s2.repository, s2.errors, s2.refusals, s2.subagents);
  assert.equal(third.messages.find((m) => m.message.id === "pa")!.message, pa2);
});

test("a nested sub-agent's events and its load land in its own call, within its parent's child", () => {
  // The child "cr" of call c1 delegates in turn: call g1 of its reply "ca" runs grandchild "gr".
  const grand = [msg("gu", "user", "gr", [{ type: "text", text: "dig" }]), msg("ga", "assistant", "gr", [], { type: "running" })];
  const childWithCall = [
    msg("cu", "user", "cr", [{ type: "text", text: "look at A" }]),
    msg("ca", "assistant", "cr", [call("g1", { task: "dig" })], { type: "running" }),
  ];
  const nested = (sequence: number, event: RunEvent): RunEvent =>
    sub(sequence, { type: "subagent", run_id: "cr", sequence: sequence, message_id: "ca", tool_call_id: "g1", thread_id: "g", child_run_id: "gr", event });
  let s = fold(setup(), [
    sub(2, snap("cr", 1, CHILD, childWithCall, "running")),
    nested(3, snap("gr", 1, "g", grand, "running")),
    nested(4, { type: "token", run_id: "gr", sequence: 2, message_id: "ga", text: "deep" }),
  ]);
  const outer = subagentKey("pa", "c1");
  const inner = subagentKey("ca", "g1");
  assert.equal(childText(s.subagents[outer]!.chat, inner), "deep");
  // A reload's load of the grandchild goes to the same place.
  const loaded: ThreadSnapshot = {
    thread_id: "g",
    checkpoint_id: null,
    messages: [grand[0]!, { ...grand[1]!, content: [{ type: "text", text: "deep down" }], status: { type: "complete", reason: "stop" } }],
    messageRepository: snap("gr", 9, "g", [grand[0]!, { ...grand[1]!, content: [{ type: "text", text: "deep down" }], status: { type: "complete", reason: "stop" } }], "succeeded").messageRepository!,
    active_run: null,
  };
  s = chatReducer(s, { type: "subagent_load", messageId: "ca", toolCallId: "g1", threadId: "g", runId: "gr", snapshot: loaded, path: [outer] });
  assert.equal(childText(s.subagents[outer]!.chat, inner), "deep down");
  assert.equal(s.subagents[inner], undefined, "nothing at the top level");
  // A path to a call the page does not have changes nothing.
  assert.equal(chatReducer(s, { type: "subagent_load", messageId: "ca", toolCallId: "g1", threadId: "g", runId: "gr", snapshot: loaded, path: ["nope"] }), s);
});
