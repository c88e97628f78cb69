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
import type { RunError } from "./reducer";
import { runIdOf } from "./reducer";
import type { WireAttachment, WireMessage, WireMessagePart, WireRepository } from "./types";

type Errors = Readonly<Record<string, RunError>>;

const ASSISTANT_STATUS_REASONS = new Set(["cancelled", "tool-calls", "length", "content-filter", "other", "error"]);

function toStatus(message: WireMessage, errors: Errors): MessageStatus | undefined {
  const s = message.status;
  if (!s) return undefined;
  switch (s.type) {
    case "running":
      return { type: "running" };
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

export function toMessageLike(message: WireMessage, errors: Errors): ThreadMessageLike {
  const custom = { ...(message.metadata?.custom ?? {}) };
  const runId = runIdOf(message);
  if (runId) custom.runId = runId;
  const createdAt = message.createdAt ? new Date(message.createdAt) : undefined;
  const base = { id: message.id, ...(createdAt && !Number.isNaN(createdAt.getTime()) ? { createdAt } : {}) };
  const content = Array.isArray(message.content) ? message.content : [];
  switch (message.role) {
    case "assistant": {
      const status = toStatus(message, errors);
      // assistant-ui only renders images with data:, https: or blob: sources.
      const parts: ({ type: "text"; text: string } | { type: "image"; image: string })[] = [];
      for (const p of content) {
        if (isText(p)) parts.push({ type: "text", text: p.text });
        else if (isImage(p) && /^(data:|https:|blob:)/i.test(p.image)) parts.push({ type: "image", image: p.image });
      }
      return { ...base, role: "assistant", content: parts, ...(status ? { status } : {}), metadata: { custom } };
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

type Cached = { errors: RunError | undefined; message: ThreadMessage };
const cache = new WeakMap<WireMessage, Cached>();

function convert(message: WireMessage, parentId: string | null, errors: Errors): ThreadMessage {
  const runId = runIdOf(message);
  const err = runId ? errors[runId] : undefined;
  const hit = cache.get(message);
  if (hit && hit.errors === err) return hit.message;
  const [item] = ExportedMessageRepository.fromBranchableArray([{ message: toMessageLike(message, errors), parentId }])
    .messages;
  cache.set(message, { errors: err, message: item!.message });
  return item!.message;
}

/**
 * The snapshot's messageRepository as assistant-ui's ExportedMessageRepository.
 * Unchanged messages keep their converted object, so only the streaming
 * message re-renders per token.
 */
export function toExportedRepository(repo: WireRepository, errors: Errors): ExportedMessageRepository {
  return {
    headId: repo.headId,
    messages: repo.messages.map(({ message, parentId }) => ({ message: convert(message, parentId, errors), parentId })),
  };
}
