// Wire types of the Threadline contract (../shared/API.md). Kept free of any
// framework import so the reducer and its tests run in plain Node.

export type MessageRole = "user" | "assistant" | "system";

export type WireMessagePart =
  | { type: "text"; text: string }
  | { type: "image"; image: string }
  | { type: string; [key: string]: unknown };

export type WireStatus =
  | { type: "running" }
  | { type: "complete"; reason?: string }
  | { type: "incomplete"; reason?: string; error?: unknown }
  | { type: "requires-action"; reason?: string };

export type WireAttachment = {
  id: string;
  type?: string;
  name?: string;
  contentType?: string;
  size?: number;
  url?: string;
  content?: WireMessagePart[];
  status?: { type: string };
};

export type WireMessage = {
  id: string;
  role: MessageRole;
  content: WireMessagePart[];
  createdAt?: string;
  status?: WireStatus | null;
  attachments?: WireAttachment[] | null;
  metadata?: {
    runId?: string;
    custom?: {
      checkpointId?: string | null;
      parentCheckpointId?: string | null;
      runId?: string;
      [key: string]: unknown;
    };
    [key: string]: unknown;
  } | null;
};

export type WireRepositoryItem = { message: WireMessage; parentId: string | null };
export type WireRepository = { headId: string | null; messages: WireRepositoryItem[] };

export type ActiveRun = { run_id: string; message_id: string; sequence: number };

/** GET /threads/{id}/messages */
export type ThreadSnapshot = {
  thread_id: string;
  checkpoint_id: string | null;
  messages: WireMessage[];
  messageRepository: WireRepository;
  active_run: ActiveRun | null;
};

export type RunStatus = "running" | "succeeded" | "failed" | "cancelled" | "interrupted" | "requires_action" | "incomplete";

export type SnapshotEvent = {
  type: "snapshot";
  run_id: string;
  sequence: number;
  thread_id: string;
  checkpoint_id: string | null;
  run_status: RunStatus;
  messages: WireMessage[];
  messageRepository?: WireRepository;
};

export type TokenEvent = {
  type: "token";
  run_id: string;
  sequence: number;
  message_id: string;
  text: string;
};

export type ErrorEvent = {
  type: "error";
  run_id: string;
  sequence: number;
  code: string;
  error: string;
};

/** Agent runs (API.md, "Agent runs"): a reasoning delta. */
export type ReasoningEvent = {
  type: "reasoning";
  run_id: string;
  sequence: number;
  message_id: string;
  text: string;
};

/** A piece of a tool call's argsText; the first for a tool_call_id opens its part. */
export type ToolCallEvent = {
  type: "tool_call";
  run_id: string;
  sequence: number;
  message_id: string;
  tool_call_id: string;
  tool_name: string;
  args_text: string;
};

export type ToolResultEvent = {
  type: "tool_result";
  run_id: string;
  sequence: number;
  message_id: string;
  tool_call_id: string;
  result: unknown;
  is_error?: boolean;
};

export type DataEvent = {
  type: "data";
  run_id: string;
  sequence: number;
  message_id: string;
  name: string;
  data: unknown;
};

export type AgentEvent = ReasoningEvent | ToolCallEvent | ToolResultEvent | DataEvent;

export type RunEvent = SnapshotEvent | TokenEvent | ErrorEvent | AgentEvent;

/** An assistant message's tool-call part (assistant-ui's shape). */
export type WireToolCallPart = {
  type: "tool-call";
  toolCallId: string;
  toolName: string;
  args?: Record<string, unknown>;
  argsText?: string;
  result?: unknown;
  isError?: boolean;
  approval?: { id: string; approved?: boolean; reason?: string; options?: ApprovalOption[] };
};

/**
 * One option of an agent's permission request (acp:<name>), as a waiting
 * tool-call part's approval carries it: the agent's id and name for it,
 * and its kind in assistant-ui's spelling.
 */
export type ApprovalOption = { id: string; kind: string; label: string };

/** GET /tools */
export type ToolSpec = { name: string; description?: string; parameters?: unknown; approval?: boolean };

export type ThreadSummary = {
  thread_id: string;
  title: string | null;
  created_at: string;
  updated_at: string;
  metadata: Record<string, unknown> | null;
};

export type ThreadPage = { threads: ThreadSummary[]; next_cursor: string | null };

export type ApiErrorBody = { error: { code: string; message: string; [key: string]: unknown } };

export type UploadedAttachment = {
  id: string;
  name: string;
  contentType: string;
  size: number;
  url: string;
};

export type RunRequest = {
  message?: {
    id?: string;
    content: string | WireMessagePart[];
    attachments?: { id: string }[];
  };
  parent_message_id: string | null;
  source_message_id?: string | null;
  run_config?: {
    model?: string;
    temperature?: number;
    system?: string;
    custom?: Record<string, unknown>;
    max_steps?: number;
    tools?: (string | ClientToolSpec)[];
  };
  on_disconnect?: "continue" | "cancel";
  /** Continuing an agent turn that ended requires_action. */
  tool_results?: { tool_call_id: string; result: unknown; is_error?: boolean }[];
  approvals?: { tool_call_id: string; approved: boolean; option_id?: string; reason?: string }[];
};

/** A tool the client runs itself, declared per run. */
export type ClientToolSpec = { name: string; description: string; parameters: unknown; client: true };
