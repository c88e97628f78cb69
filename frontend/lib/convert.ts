// The contract's messages are assistant-ui ThreadMessages already; this turns
// the JSON form (string dates, parts this client does not render) into what
// ExportedMessageRepository.fromBranchableArray expects, and nothing more.
// Branches, heads and sibling counts stay assistant-ui's business.

import {
  ExportedMessageRepository,
  type CompleteAttachment,
  type MessageStatus,
  type ThreadMessage,
  type ThreadMessageLike,
} from "@assistant-ui/react";
import type { AnswerRefusal, RunError } from "./reducer";
import { CLIENT_TOOL_NAMES } from "./tools";
import { runIdOf } from "./reducer";
import type { ApprovalOption, WireAttachment, WireMessage, WireMessagePart, WireRepository, WireToolCallPart } from "./types";

type Errors = Readonly<Record<string, RunError>>;

const ASSISTANT_STATUS_REASONS = new Set(["cancelled", "tool-calls", "length", "content-filter", "other", "error"]);

function toStatus(message: WireMessage, errors: Errors): MessageStatus | undefined {
  const s = message.status;
  if (!s) return undefined;
  switch (s.type) {
    case "running":
      return { type: "running" };
    case "requires-action":
      return { type: "requires-action", reason: "tool-calls" };
    case "complete":
      return { type: "complete", reason: s.reason === "unknown" ? "unknown" : "stop" };
    case "incomplete": {
      const reason = (ASSISTANT_STATUS_REASONS.has(s.reason ?? "") ? s.reason : "other") as Extract<
        MessageStatus,
        { type: "incomplete" }
      >["reason"];
      const runId = runIdOf(message);
      const event = runId ? errors[runId] : undefined;
      let error: string | undefined;
      if (event) {
        error = `${event.message} (${event.code})`;
      } else if (typeof s.error === "string" && s.error) {
        error = s.error;
      } else if (s.error && typeof s.error === "object") {
        const e = s.error as { message?: unknown; code?: unknown };
        error = typeof e.message === "string" ? e.message : JSON.stringify(s.error);
      } else if (reason === "error") {
        error = "The model failed.";
      }
      return error === undefined ? { type: "incomplete", reason } : { type: "incomplete", reason, error };
    }
    default:
      return { type: "complete", reason: "unknown" };
  }
}

function isText(p: WireMessagePart): p is { type: "text"; text: string } {
  return p.type === "text" && typeof (p as { text?: unknown }).text === "string";
}

function isImage(p: WireMessagePart): p is { type: "image"; image: string } {
  return p.type === "image" && typeof (p as { image?: unknown }).image === "string";
}

function userParts(parts: WireMessagePart[]) {
  const out: ({ type: "text"; text: string } | { type: "image"; image: string })[] = [];
  for (const p of parts) {
    if (isText(p)) out.push({ type: "text", text: p.text });
    else if (isImage(p)) out.push({ type: "image", image: p.image });
  }
  return out;
}

type FilePart = { type: "file"; data: string; mimeType: string; filename?: string };

function isFile(p: WireMessagePart): p is FilePart {
  const f = p as { data?: unknown; mimeType?: unknown };
  return p.type === "file" && typeof f.data === "string" && typeof f.mimeType === "string";
}

/** An attachment's parts: its image, or the file it stands for (a file chip). */
function attachmentParts(a: WireAttachment, image: boolean) {
  const parts: ({ type: "text"; text: string } | { type: "image"; image: string } | FilePart)[] = [];
  for (const p of a.content ?? []) {
    if (isText(p)) parts.push({ type: "text", text: p.text });
    else if (isImage(p)) parts.push({ type: "image", image: p.image });
    else if (isFile(p)) parts.push({ type: "file", data: p.data, mimeType: p.mimeType, ...(p.filename ? { filename: p.filename } : {}) });
  }
  if (parts.length === 0 && a.url) {
    parts.push(
      image
        ? { type: "image", image: a.url }
        : { type: "file", data: a.url, mimeType: a.contentType ?? "application/octet-stream", ...(a.name ? { filename: a.name } : {}) },
    );
  }
  return parts;
}

function toAttachment(a: WireAttachment): CompleteAttachment {
  const contentType = a.contentType ?? "";
  const image = a.type === "image" || contentType.startsWith("image/");
  const content = attachmentParts(a, image);
  return {
    id: a.id,
    type: a.type ?? (image ? "image" : "document"),
    name: a.name ?? "attachment",
    ...(contentType ? { contentType } : {}),
    status: { type: "complete" },
    content,
  };
}

type AssistantPart = Exclude<ThreadMessageLike["content"], string>[number];
type ToolArgs = NonNullable<Extract<AssistantPart, { type: "tool-call" }>["args"]>;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * A tool-call part in assistant-ui's shape; result and isError only once
 * answered. In a turn that waits (requires-action), an unanswered call of a
 * server tool waits for an approval: it gets one, addressed by its call id,
 * unless the service sent its own; an agent's permission request (perms,
 * by call id) gives it the agent's options.
 */
function toolCallPart(p: WireMessagePart, waiting: boolean, perms: Permissions): AssistantPart | null {
  const c = p as Partial<WireToolCallPart>;
  if (typeof c.toolCallId !== "string" || typeof c.toolName !== "string") return null;
  const argsText = typeof c.argsText === "string" ? c.argsText : c.args ? JSON.stringify(c.args) : "";
  const answered = "result" in c && c.result !== undefined;
  return {
    type: "tool-call",
    toolCallId: c.toolCallId,
    toolName: c.toolName,
    argsText,
    args: (isRecord(c.args) ? c.args : {}) as ToolArgs,
    ...(answered ? { result: c.result, isError: c.isError === true } : {}),
    ...approvalOf(c, waiting && !answered, perms),
  };
}

function approvalOf(c: Partial<WireToolCallPart>, waiting: boolean, perms: Permissions): { approval?: WireToolCallPart["approval"] } {
  const options = c.toolCallId ? perms.get(c.toolCallId) : undefined;
  if (c.approval && typeof c.approval.id === "string") {
    return { approval: options && !c.approval.options ? { ...c.approval, options } : c.approval };
  }
  if (waiting && c.toolCallId && !CLIENT_TOOL_NAMES.has(c.toolName ?? "")) {
    return { approval: { id: c.toolCallId, ...(options ? { options } : {}) } };
  }
  return {};
}

/** The options of the agents' permission requests of a message, by call id. */
type Permissions = ReadonlyMap<string, ApprovalOption[]>;

/**
 * Reads the `permission` data parts of a message (API.md, "External
 * agents"): {"toolCallId","options":[{"optionId","name","kind"}]}, the
 * kinds in ACP's spelling (allow_once), given in assistant-ui's
 * (allow-once). A live turn has only these; a snapshot's tool-call part
 * carries the same as its approval.
 */
export function permissionOptions(content: readonly WireMessagePart[]): Permissions {
  const out = new Map<string, ApprovalOption[]>();
  for (const p of content) {
    const x = p as { type: string; name?: unknown; data?: unknown };
    if (x.type !== "data" || x.name !== "permission" || !isRecord(x.data)) continue;
    const { toolCallId, options } = x.data;
    if (typeof toolCallId !== "string" || !Array.isArray(options)) continue;
    const opts: ApprovalOption[] = [];
    for (const o of options) {
      if (!isRecord(o) || typeof o.optionId !== "string") continue;
      const kind = typeof o.kind === "string" ? o.kind.replaceAll("_", "-") : "";
      opts.push({ id: o.optionId, kind, label: typeof o.name === "string" && o.name ? o.name : o.optionId });
    }
    if (opts.length > 0) out.set(toolCallId, opts);
  }
  return out;
}

/** One wire part of an assistant message as assistant-ui renders it, or null. */
function assistantPart(p: WireMessagePart, waiting: boolean, perms: Permissions): AssistantPart | null {
  const x = p as Record<string, unknown>;
  switch (p.type) {
    case "text":
      return isText(p) ? { type: "text", text: p.text } : null;
    case "reasoning":
      return typeof x.text === "string" ? { type: "reasoning", text: x.text } : null;
    case "image":
      // assistant-ui only renders images with data:, https: or blob: sources.
      return isImage(p) && /^(data:|https:|blob:)/i.test(p.image) ? { type: "image", image: p.image } : null;
    case "tool-call":
      return toolCallPart(p, waiting, perms);
    case "data":
      return typeof x.name === "string" ? { type: "data", name: x.name, data: x.data } : null;
    case "source":
      return typeof x.url === "string"
        ? { type: "source", sourceType: "url", id: typeof x.id === "string" ? x.id : x.url, url: x.url, ...(typeof x.title === "string" ? { title: x.title } : {}) }
        : null;
    case "file":
      return isFile(p) ? { type: "file", data: p.data, mimeType: p.mimeType, ...(p.filename ? { filename: p.filename } : {}) } : null;
    default:
      return null;
  }
}

/**
 * The parts assistant-ui renders. A plan is shown once, where it first
 * appears, as its latest version: each `plan` data part restates the whole
 * plan with its tasks' progress. An agent's `permission` data part is not
 * shown: its call's approval card holds its options.
 */
function assistantParts(content: WireMessagePart[], waiting: boolean): AssistantPart[] {
  const out: AssistantPart[] = [];
  let planAt = -1;
  const perms = permissionOptions(content);
  for (const p of content) {
    const part = assistantPart(p, waiting, perms);
    if (!part || (part.type === "data" && part.name === "permission")) continue;
    if (part.type === "data" && part.name === "plan") {
      if (planAt >= 0) {
        out[planAt] = part;
        continue;
      }
      planAt = out.length;
    }
    out.push(part);
  }
  return out;
}

/**
 * How this page sees a waiting turn: stale when the conversation moved on
 * below it (it has a child, so the service refuses answers to it); refusal
 * counts the page's answers the service refused, with the last one's words.
 */
export type TurnView = { stale?: boolean; refusal?: AnswerRefusal | undefined };

export function toMessageLike(message: WireMessage, errors: Errors, view: TurnView = {}): ThreadMessageLike {
  const custom = { ...(message.metadata?.custom ?? {}) };
  const runId = runIdOf(message);
  if (runId) custom.runId = runId;
  if (view.stale) custom.stale = true;
  if (view.refusal) custom.refusal = view.refusal;
  const createdAt = message.createdAt ? new Date(message.createdAt) : undefined;
  const base = { id: message.id, ...(createdAt && !Number.isNaN(createdAt.getTime()) ? { createdAt } : {}) };
  const content = Array.isArray(message.content) ? message.content : [];
  switch (message.role) {
    case "assistant": {
      const status = toStatus(message, errors);
      return { ...base, role: "assistant", content: assistantParts(content, message.status?.type === "requires-action" && !view.stale), ...(status ? { status } : {}), metadata: { custom } };
    }
    case "system": {
      const text = content.filter(isText).map((p) => p.text).join("");
      return { ...base, role: "system", content: [{ type: "text", text }], metadata: { custom } };
    }
    default:
      return {
        ...base,
        role: "user",
        content: userParts(content),
        attachments: (message.attachments ?? []).map(toAttachment),
        metadata: { custom },
      };
  }
}

type Cached = { errors: RunError | undefined; stale: boolean; refusal: AnswerRefusal | undefined; message: ThreadMessage };
const cache = new WeakMap<WireMessage, Cached>();

function convert(message: WireMessage, parentId: string | null, errors: Errors, view: { stale: boolean; refusal: AnswerRefusal | undefined }): ThreadMessage {
  const runId = runIdOf(message);
  const err = runId ? errors[runId] : undefined;
  const hit = cache.get(message);
  if (hit && hit.errors === err && hit.stale === view.stale && hit.refusal === view.refusal) return hit.message;
  const [item] = ExportedMessageRepository.fromBranchableArray([{ message: toMessageLike(message, errors, view), parentId }])
    .messages;
  cache.set(message, { errors: err, stale: view.stale, refusal: view.refusal, message: item!.message });
  return item!.message;
}

/** Whether a waiting turn can no longer be answered: something follows it. */
function staleWaiting(message: WireMessage, parents: ReadonlySet<string | null>): boolean {
  return message.role === "assistant" && message.status?.type === "requires-action" && parents.has(message.id);
}

/**
 * The snapshot's messageRepository as assistant-ui's ExportedMessageRepository.
 * Unchanged messages keep their converted object, so only the streaming
 * message re-renders per token.
 */
export function toExportedRepository(
  repo: WireRepository,
  errors: Errors,
  refusals: Readonly<Record<string, AnswerRefusal>> = {},
): ExportedMessageRepository {
  const parents = new Set(repo.messages.map((m) => m.parentId));
  return {
    headId: repo.headId,
    messages: repo.messages.map(({ message, parentId }) => ({
      message: convert(message, parentId, errors, {
        stale: staleWaiting(message, parents),
        refusal: refusals[message.id],
      }),
      parentId,
    })),
  };
}
