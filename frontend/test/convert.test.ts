import { test } from "node:test";
import assert from "node:assert/strict";
import { permissionOptions, toMessageLike } from "../lib/convert";
import { continuation, type ToolAnswer } from "../lib/tools";
import type { WireMessage, WireMessagePart } from "../lib/types";

const permission: WireMessagePart = {
  type: "data",
  name: "permission",
  data: {
    id: "permission_call_2",
    toolCallId: "call_2",
    title: "Modifying critical configuration file",
    key: "k",
    options: [
      { optionId: "allow", name: "Allow this change", kind: "allow_once" },
      { optionId: "always", name: "Allow always", kind: "allow_always" },
      { optionId: "reject", name: "Skip this change", kind: "reject_once" },
    ],
  },
};

const options = [
  { id: "allow", kind: "allow-once", label: "Allow this change" },
  { id: "always", kind: "allow-always", label: "Allow always" },
  { id: "reject", kind: "reject-once", label: "Skip this change" },
];

function agentTurn(call: Record<string, unknown>): WireMessage {
  return {
    id: "a1",
    role: "assistant",
    status: { type: "requires-action", reason: "tool-calls" },
    content: [
      { type: "text", text: "I need to edit." },
      { type: "tool-call", toolCallId: "call_2", toolName: "Modifying critical configuration file", argsText: "{}", ...call },
      permission,
    ] as WireMessagePart[],
  };
}

function approvalOf(m: WireMessage): unknown {
  const content: unknown = toMessageLike(m, {}).content;
  assert.ok(Array.isArray(content));
  const call = (content as unknown[]).find((p): p is { type: string; approval?: unknown } => typeof p === "object" && p !== null && (p as { type?: unknown }).type === "tool-call");
  return call?.approval;
}

test("an agent's permission request: its options by name, from the data part (live) or the part's approval (snapshot)", () => {
  assert.deepEqual([...permissionOptions(agentTurn({}).content)], [["call_2", options]]);
  assert.deepEqual(approvalOf(agentTurn({})), { id: "call_2", options }, "live: the reducer's parts have only the data part");
  const fromWire = { id: "call_2", options: options.slice(0, 1) };
  assert.deepEqual(approvalOf(agentTurn({ approval: fromWire })), fromWire, "a snapshot's approval as sent");
  assert.equal(approvalOf(agentTurn({ result: "done" })), undefined, "an answered call asks nothing");
  const shown = toMessageLike(agentTurn({}), {}).content;
  assert.ok(Array.isArray(shown));
  assert.equal(shown.length, 2, "the permission data part is not shown: the card holds it");
});

test("the chosen option goes back as option_id beside approved", () => {
  const answers = new Map<string, ToolAnswer>([["call_2", { kind: "approval", toolCallId: "call_2", approved: true, optionId: "always" }]]);
  assert.deepEqual(continuation(agentTurn({}), answers), {
    parent_message_id: "a1",
    approvals: [{ tool_call_id: "call_2", approved: true, option_id: "always" }],
  });
});
