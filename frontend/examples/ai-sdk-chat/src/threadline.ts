// What both pages share: the chat id in the URL, and the thread's messages
// loaded from Threadline's native API as AI SDK UI messages.
import type { UIMessage } from "ai";

export const API = "/api/v1/ui/chat";

/**
 * The request body's extras: ?model=<name> in the URL picks the run's
 * model (Threadline's run_config, which the route takes beside useChat's
 * own fields); without it the service's default model answers.
 */
export function runBody(): { run_config?: { model: string } } {
  const model = new URL(window.location.href).searchParams.get("model");
  return model ? { run_config: { model } } : {};
}

/**
 * The chat id: ?chat=<uuid> in the URL, made (and put there) when absent,
 * so a reload opens the same chat. A UUID chat id is the thread's own id.
 */
export function chatIdFromURL(): string {
  const url = new URL(window.location.href);
  let id = url.searchParams.get("chat");
  if (!id) {
    id = crypto.randomUUID();
    url.searchParams.set("chat", id);
    window.history.replaceState(null, "", url);
  }
  return id;
}

type NativePart = {
  type: string;
  text?: string;
  toolCallId?: string;
  toolName?: string;
  args?: unknown;
  result?: unknown;
  isError?: boolean;
  name?: string;
  data?: unknown;
};
type NativeMessage = { id: string; role: "user" | "assistant" | "system"; content: NativePart[] };
type NativeSnapshot = { messages: NativeMessage[]; active_run: { message_id: string } | null };

function uiPart(p: NativePart): UIMessage["parts"][number] | null {
  switch (p.type) {
    case "text":
      return p.text ? { type: "text", text: p.text } : null;
    case "reasoning":
      return { type: "reasoning", text: p.text ?? "" };
    case "tool-call":
      return p.result === undefined
        ? { type: "dynamic-tool", toolName: p.toolName ?? "", toolCallId: p.toolCallId ?? "", state: "input-available", input: p.args }
        : p.isError
          ? { type: "dynamic-tool", toolName: p.toolName ?? "", toolCallId: p.toolCallId ?? "", state: "output-error", input: p.args, errorText: String(p.result) }
          : { type: "dynamic-tool", toolName: p.toolName ?? "", toolCallId: p.toolCallId ?? "", state: "output-available", input: p.args, output: p.result };
    case "data":
      return { type: `data-${p.name ?? "value"}`, data: p.data } as UIMessage["parts"][number];
  }
  return null;
}

/**
 * The path the thread shows, as UI messages, without the reply still
 * running: the AI SDK keeps finished messages, and resumeStream() brings
 * the running one whole (GET /api/v1/ui/chat/{id}/stream). An unknown
 * thread is a new chat: no messages.
 */
export async function loadMessages(chatId: string): Promise<UIMessage[]> {
  const res = await fetch(`/api/v1/threads/${encodeURIComponent(chatId)}/messages`);
  if (res.status === 404) return [];
  if (!res.ok) throw new Error(`loading the chat: HTTP ${res.status}`);
  const snap = (await res.json()) as NativeSnapshot;
  return snap.messages
    .filter((m) => m.id !== snap.active_run?.message_id && m.role !== "system")
    .map((m) => ({ id: m.id, role: m.role, parts: m.content.map(uiPart).filter((p) => p !== null) }));
}
