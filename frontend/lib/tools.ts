// Agent turns that wait for a person (API.md, "Agent runs", "Tools"): the
// client tools this app declares, which calls of a waiting turn still need an
// answer, and the continuation request once every one has it. Pure: tested
// with node --test.

import type { ClientToolSpec, RunRequest, WireMessage, WireToolCallPart } from "./types";

/** The tools this app runs itself: the person answers them in a form. */
export const CLIENT_TOOLS: readonly ClientToolSpec[] = [
  {
    name: "ask_user",
    description: "Ask the person a question and wait for their answer. Use when you need a decision or a fact only they have.",
    parameters: {
      type: "object",
      properties: {
        question: { type: "string", description: "The question, in one sentence." },
        choices: { type: "array", items: { type: "string" }, description: "Suggested answers, if any." },
      },
      required: ["question"],
    },
    client: true,
  },
];

export const CLIENT_TOOL_NAMES: ReadonlySet<string> = new Set(CLIENT_TOOLS.map((t) => t.name));

/** The run_config.tools of a run: every server tool by name and the client tools. */
export function runTools(serverTools: readonly string[] | null): (string | ClientToolSpec)[] | undefined {
  if (!serverTools) return undefined;
  return [...serverTools, ...CLIENT_TOOLS];
}

export type ToolAnswer =
  | { kind: "result"; toolCallId: string; result: unknown; isError: boolean }
  | { kind: "approval"; toolCallId: string; approved: boolean; optionId?: string; reason?: string };

function isCall(p: unknown): p is WireToolCallPart {
  const c = p as Partial<WireToolCallPart> | null;
  return !!c && c.type === "tool-call" && typeof c.toolCallId === "string";
}

/** The calls of a message that wait for the person: unanswered, in a turn that requires action. */
export function waitingCalls(message: WireMessage): WireToolCallPart[] {
  if (message.role !== "assistant" || message.status?.type !== "requires-action") return [];
  return message.content.filter(isCall).filter((c) => c.result === undefined);
}

/**
 * The continuation of a waiting turn once `answers` covers every waiting
 * call, or null while some still wait. Answers for calls that do not wait
 * are ignored.
 */
export function continuation(message: WireMessage, answers: ReadonlyMap<string, ToolAnswer>): RunRequest | null {
  const waiting = waitingCalls(message);
  if (waiting.length === 0 || waiting.some((c) => !answers.has(c.toolCallId))) return null;
  const tool_results: NonNullable<RunRequest["tool_results"]> = [];
  const approvals: NonNullable<RunRequest["approvals"]> = [];
  for (const c of waiting) {
    const a = answers.get(c.toolCallId)!;
    if (a.kind === "result") tool_results.push({ tool_call_id: c.toolCallId, result: a.result, ...(a.isError ? { is_error: true } : {}) });
    else
      approvals.push({
        tool_call_id: c.toolCallId,
        approved: a.approved,
        ...(a.optionId ? { option_id: a.optionId } : {}),
        ...(a.reason ? { reason: a.reason } : {}),
      });
  }
  return {
    parent_message_id: message.id,
    ...(tool_results.length ? { tool_results } : {}),
    ...(approvals.length ? { approvals } : {}),
  };
}
