// Per-chat settings (system prompt, temperature, model, max steps), kept in
// the thread's metadata under "chat_settings" (PATCH /threads/{id}) and
// sent in each run's run_config. Also the fork route's client.

import { API_BASE, errorFrom, getThread, threadPath } from "./api";

export type ChatSettings = { system?: string; temperature?: number; model?: string; max_steps?: number };

export const SETTINGS_KEY = "chat_settings";

/** The settings in a thread's metadata, keeping only well-formed fields. */
export function settingsFrom(metadata: Record<string, unknown> | null | undefined): ChatSettings {
  const raw = metadata?.[SETTINGS_KEY];
  if (!raw || typeof raw !== "object") return {};
  const r = raw as Record<string, unknown>;
  const out: ChatSettings = {};
  if (typeof r.system === "string" && r.system.trim()) out.system = r.system;
  if (typeof r.temperature === "number" && r.temperature >= 0 && r.temperature <= 2) out.temperature = r.temperature;
  if (typeof r.model === "string" && r.model) out.model = r.model;
  if (typeof r.max_steps === "number" && Number.isInteger(r.max_steps) && r.max_steps >= 1 && r.max_steps <= 100) out.max_steps = r.max_steps;
  return out;
}

/** The run_config fields the settings add (model only when no other is asked for). */
export function runConfigOf(s: ChatSettings): Record<string, unknown> {
  return {
    ...(s.system ? { system: s.system } : {}),
    ...(s.temperature !== undefined ? { temperature: s.temperature } : {}),
    ...(s.max_steps !== undefined ? { max_steps: s.max_steps } : {}),
    ...(s.model ? { model: s.model } : {}),
  };
}

// The settings of the threads this page has read or saved, so a run sends
// them without asking again.
const known = new Map<string, ChatSettings>();

export function cachedSettings(threadId: string): ChatSettings {
  return known.get(threadId) ?? {};
}

export function rememberSettings(threadId: string, s: ChatSettings): void {
  known.set(threadId, s);
}

/**
 * Saves the settings in the thread's metadata (the rest of it kept). A
 * thread not written yet (a new chat) is created with them.
 */
export async function saveSettings(threadId: string, known: Record<string, unknown> | null, s: ChatSettings): Promise<void> {
  // Read again: other keys (branch names) may have changed since the panel opened.
  const metadata = (await getThread(threadId).catch(() => null))?.metadata ?? known;
  const body = JSON.stringify({ metadata: { ...(metadata ?? {}), [SETTINGS_KEY]: s } });
  const headers = { "content-type": "application/json" };
  let res = await fetch(threadPath(threadId), { method: "PATCH", headers, body });
  if (res.status === 404) {
    res = await fetch(`${API_BASE}/threads`, {
      method: "POST",
      headers,
      body: JSON.stringify({ thread_id: threadId, metadata: { ...(metadata ?? {}), [SETTINGS_KEY]: s } }),
    });
  }
  if (!res.ok) throw await errorFrom(res);
  rememberSettings(threadId, s);
}

/** POST /threads/{id}/fork: a new thread holding the path root → message. */
export async function forkThread(threadId: string, messageId: string): Promise<string> {
  const res = await fetch(`${threadPath(threadId)}/fork`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ message_id: messageId }),
  });
  if (!res.ok) throw await errorFrom(res);
  return ((await res.json()) as { thread_id: string }).thread_id;
}
