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

export type RunStatus = "running" | "succeeded" | "failed" | "cancelled" | "interrupted";

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

export type RunEvent = SnapshotEvent | TokenEvent | ErrorEvent;

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
  };
  on_disconnect?: "continue" | "cancel";
};
