// Browser-side calls to the contract, through the web origin's /api/v1 proxy.

import type {
  ApiErrorBody,
  RunRequest,
  ThreadPage,
  ThreadSnapshot,
  ThreadSummary,
  ToolSpec,
  UploadedAttachment,
  WireMessage,
} from "./types";
import type { Limits } from "./limits";

export const API_BASE = "/api/v1";

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly body: unknown;
  constructor(status: number, code: string, message: string, body: unknown) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

export async function errorFrom(res: Response): Promise<ApiError> {
  let body: unknown = null;
  const text = await res.text().catch(() => "");
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = text;
  }
  const err = (body as Partial<ApiErrorBody> | null)?.error;
  if (err && typeof err.code === "string") {
    return new ApiError(res.status, err.code, err.message ?? err.code, body);
  }
  return new ApiError(res.status, `http_${res.status}`, text || res.statusText || `HTTP ${res.status}`, body);
}

async function json<T>(res: Response): Promise<T> {
  if (!res.ok) throw await errorFrom(res);
  return (await res.json()) as T;
}

async function ok(res: Response): Promise<void> {
  if (!res.ok) throw await errorFrom(res);
}

const JSON_HEADERS = { "content-type": "application/json" };

export function threadPath(threadId: string): string {
  return `${API_BASE}/threads/${encodeURIComponent(threadId)}`;
}

export async function listThreads(limit: number, cursor?: string | null): Promise<ThreadPage> {
  const q = new URLSearchParams({ limit: String(limit) });
  if (cursor) q.set("cursor", cursor);
  return json<ThreadPage>(await fetch(`${API_BASE}/threads?${q}`, { cache: "no-store" }));
}

export async function renameThread(threadId: string, title: string): Promise<ThreadSummary> {
  return json<ThreadSummary>(
    await fetch(threadPath(threadId), { method: "PATCH", headers: JSON_HEADERS, body: JSON.stringify({ title }) }),
  );
}

export async function deleteThread(threadId: string): Promise<void> {
  await ok(await fetch(threadPath(threadId), { method: "DELETE" }));
}

/** The thread's snapshot, or null when the thread does not exist (yet). */
export async function getSnapshot(threadId: string, signal?: AbortSignal): Promise<ThreadSnapshot | null> {
  const res = await fetch(`${threadPath(threadId)}/messages`, { cache: "no-store", signal });
  if (res.status === 404) return null;
  return json<ThreadSnapshot>(res);
}

export async function putHead(threadId: string, messageId: string): Promise<void> {
  await ok(
    await fetch(`${threadPath(threadId)}/head`, {
      method: "PUT",
      headers: JSON_HEADERS,
      body: JSON.stringify({ message_id: messageId }),
    }),
  );
}

/** Starts a run; resolves with the NDJSON response once its headers arrived. */
export async function startRunStream(threadId: string, body: RunRequest, signal: AbortSignal): Promise<Response> {
  const res = await fetch(`${threadPath(threadId)}/runs/stream`, {
    method: "POST",
    headers: { ...JSON_HEADERS, accept: "application/x-ndjson" },
    body: JSON.stringify(body),
    signal,
    cache: "no-store",
  });
  if (!res.ok || !res.body) throw await errorFrom(res);
  return res;
}

export async function rejoinRunStream(threadId: string, runId: string, after: number, signal: AbortSignal): Promise<Response> {
  const res = await fetch(`${threadPath(threadId)}/runs/${encodeURIComponent(runId)}/stream?after=${after}`, {
    headers: { accept: "application/x-ndjson" },
    signal,
    cache: "no-store",
  });
  if (!res.ok || !res.body) throw await errorFrom(res);
  return res;
}

export async function cancelRun(threadId: string, runId: string): Promise<void> {
  await ok(await fetch(`${threadPath(threadId)}/runs/${encodeURIComponent(runId)}/cancel`, { method: "POST" }));
}

export async function getLimits(): Promise<Limits> {
  return json<Limits>(await fetch(`${API_BASE}/limits`, { cache: "no-store" }));
}

export async function uploadAttachment(file: File): Promise<UploadedAttachment> {
  const form = new FormData();
  form.append("file", file, file.name);
  return json<UploadedAttachment>(await fetch(`${API_BASE}/attachments`, { method: "POST", body: form }));
}

/** A v4 UUID; crypto.randomUUID needs a secure context, getRandomValues does not. */
export function newId(): string {
  const c = globalThis.crypto;
  if (typeof c.randomUUID === "function") return c.randomUUID();
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The sidebar listens for this to reload the thread list. */
export const THREADS_CHANGED = "threadline:threads-changed";
export function announceThreadsChanged(): void {
  if (typeof window !== "undefined") window.dispatchEvent(new Event(THREADS_CHANGED));
}

/** The welcome page's handoff of the first message to the chat page. */
/** An attachment of the handoff: a stored upload, as the composer had it (JSON-safe). */
export type HandoffAttachment = { id: string; type: string; name: string; contentType?: string; content: unknown[] };
export type Handoff = { messageId: string; text: string; attachments?: HandoffAttachment[] };
export const handoffKey = (threadId: string) => `threadline:handoff:${threadId}`;

export type ModelInfo = { name: string; provider?: string; model?: string; configured?: boolean; default?: boolean };

export async function listModels(): Promise<ModelInfo[]> {
  const body = await json<{ models: ModelInfo[] }>(await fetch(`${API_BASE}/models`, { cache: "no-store" }));
  return Array.isArray(body.models) ? body.models : [];
}

const MODEL_KEY = "threadline:model";

/** The model picked in this browser; "" for the service's default. */
export function getSelectedModel(): string {
  try {
    return window.localStorage.getItem(MODEL_KEY) ?? "";
  } catch {
    return "";
  }
}

export function setSelectedModel(name: string): void {
  try {
    if (name) window.localStorage.setItem(MODEL_KEY, name);
    else window.localStorage.removeItem(MODEL_KEY);
  } catch {
    /* storage off */
  }
}

/** A thread's summary (its title), or null when it does not exist. */
export async function getThread(threadId: string): Promise<ThreadSummary | null> {
  const res = await fetch(threadPath(threadId), { cache: "no-store" });
  if (res.status === 404) return null;
  return json<ThreadSummary>(res);
}

/** PATCH /threads/{id} with the whole metadata (it replaces the thread's); returns the thread. */
export async function patchThreadMetadata(threadId: string, metadata: Record<string, unknown>): Promise<ThreadSummary> {
  return json<ThreadSummary>(
    await fetch(threadPath(threadId), { method: "PATCH", headers: JSON_HEADERS, body: JSON.stringify({ metadata }) }),
  );
}

/** GET /threads/{id}/runs/{run}: the run's model, timings and usage. */
export type RunInfo = {
  run_id: string;
  status: string;
  model: string;
  usage: { prompt_tokens: number; completion_tokens: number } | null;
  created_at: string;
  finished_at: string | null;
  duration_ms: number | null;
};

export async function getRun(threadId: string, runId: string): Promise<RunInfo> {
  return json<RunInfo>(await fetch(`${threadPath(threadId)}/runs/${encodeURIComponent(runId)}`, { cache: "no-store" }));
}

/** GET /tools: the server's tools, or null when this service has no tool list. */
export async function listTools(): Promise<ToolSpec[] | null> {
  const res = await fetch(`${API_BASE}/tools`, { cache: "no-store" });
  if (res.status === 404 || res.status === 405) return null;
  const body = await json<{ tools?: ToolSpec[] }>(res);
  return Array.isArray(body.tools) ? body.tools : [];
}

/** A share link as its owner sees it (POST /threads/{id}/share). */
export type ShareInfo = { share_id: string; url: string; message_id: string; created_at: string; expires_at: string | null };

/** GET /shares/{id}: the shared path, root first. */
export type SharedPath = {
  share_id: string;
  title: string | null;
  created_at: string;
  expires_at: string | null;
  messages: WireMessage[];
};

export function sharePath(shareId: string): string {
  return `${API_BASE}/shares/${encodeURIComponent(shareId)}`;
}

/** The web app's page of a share, absolute (for copying). */
export function sharePageUrl(shareId: string): string {
  const origin = typeof window === "undefined" ? "" : window.location.origin;
  return `${origin}/s/${encodeURIComponent(shareId)}`;
}

export async function createShare(threadId: string, messageId: string): Promise<ShareInfo> {
  return json<ShareInfo>(
    await fetch(`${threadPath(threadId)}/share`, {
      method: "POST",
      headers: JSON_HEADERS,
      body: JSON.stringify({ message_id: messageId }),
    }),
  );
}

export async function revokeShare(shareId: string): Promise<void> {
  await ok(await fetch(sharePath(shareId), { method: "DELETE" }));
}

/** The shared path, or null when the link is not available (revoked, expired, unknown). */
export async function getShare(shareId: string): Promise<SharedPath | null> {
  const res = await fetch(sharePath(shareId), { cache: "no-store" });
  if (res.status === 404) return null;
  return json<SharedPath>(res);
}

/** "Continue this conversation": a new thread of the viewer's holding the path. */
export async function forkShare(shareId: string): Promise<string> {
  const body = await json<{ thread_id: string }>(await fetch(`${sharePath(shareId)}/fork`, { method: "POST" }));
  return body.thread_id;
}

/** Where a thread downloads as JSON or Markdown (GET /threads/{id}/export). */
export function exportUrl(threadId: string, format: "json" | "markdown"): string {
  return `${threadPath(threadId)}/export?format=${format}`;
}

export type ImportedThread = { thread_id: string; title: string | null; messages: number };

/** POST /threads/import: uploads an export; the threads it made, first first. */
export async function importThreads(file: File): Promise<ImportedThread[]> {
  const form = new FormData();
  form.append("file", file, file.name);
  const body = await json<{ threads?: ImportedThread[] }>(await fetch(`${API_BASE}/threads/import`, { method: "POST", body: form }));
  return Array.isArray(body.threads) ? body.threads : [];
}
