// What a delegate call's card says (issue 28): its task and title, and the
// sub-agent's state in words. No framework imports: tested with node --test.

/** The built-in tool that hands a task to a sub-agent. */
export const DELEGATE_TOOL = "delegate";

export type SubagentStatus = "running" | "waiting" | "succeeded" | "failed" | "cancelled";

export const SUBAGENT_STATUS_LABEL: Record<SubagentStatus, string> = {
  running: "running…",
  waiting: "waiting",
  succeeded: "succeeded",
  failed: "failed",
  cancelled: "cancelled",
};

/** A message status as assistant-ui and the wire both shape it. */
type Status = { type: string; reason?: string } | null | undefined;

export type SubagentView = {
  /** The delegate call's result, undefined while unanswered. */
  result: unknown;
  isError?: boolean | undefined;
  /** The status of the parent's assistant message holding the call. */
  parent: Status;
  /** The status of the child's last assistant message, when the page has the child's conversation. */
  child: Status;
};

function ended(s: Status): SubagentStatus | null {
  if (!s) return null;
  if (s.type === "complete") return "succeeded";
  if (s.type === "requires-action") return "waiting";
  if (s.type === "incomplete") return s.reason === "cancelled" ? "cancelled" : "failed";
  return null;
}

/**
 * The sub-agent's state: its own conversation's end when the page has it,
 * else the call's result (an error result that says so is a cancel), else
 * running while the parent's turn runs; a call the parent's turn left
 * unanswered was cancelled with it (Stop) or failed.
 */
export function subagentStatus(v: SubagentView): SubagentStatus {
  const own = ended(v.child);
  if (own && own !== "waiting") return own;
  if (v.result !== undefined) {
    if (!v.isError) return "succeeded";
    return /cancel|interrupt/i.test(typeof v.result === "string" ? v.result : JSON.stringify(v.result) ?? "") ? "cancelled" : "failed";
  }
  if (own === "waiting") return own;
  if (!v.parent || v.parent.type === "running" || v.parent.type === "requires-action") return "running";
  return v.parent.type === "incomplete" && v.parent.reason !== "cancelled" ? "failed" : "cancelled";
}

/** The delegate call's arguments: the task, and a title when given (else the task's first line). */
export function delegateArgs(args: unknown): { task: string; title: string } {
  const a = (args ?? {}) as { task?: unknown; title?: unknown };
  const task = typeof a.task === "string" ? a.task : "";
  const title = typeof a.title === "string" && a.title.trim() ? a.title.trim() : task.split("\n")[0]!.trim();
  return { task, title: title || "Sub-agent" };
}
