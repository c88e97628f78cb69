// The chat page's state and the pure reducer that folds the run events of the
// contract into it. No framework imports: tested with node --test.
//
// Rules (../shared/API.md, "Stream"):
// - the repository (the whole message tree) comes from snapshots; a snapshot
//   with `messageRepository` replaces it, an interim one without it updates
//   the messages it carries;
// - a token only extends the assistant message it names, and only while that
//   message is running;
// - events of a run other than the one followed are dropped once that run is
//   retired (an older run), as is every event whose sequence is not above the
//   last one applied for its run (duplicates, out-of-order delivery);
// - reasoning, tool_call, tool_result and data events ("Agent runs") edit the
//   running assistant message they name like tokens do: reasoning extends
//   the last reasoning part, tool_call pieces extend the call's argsText,
//   tool_result answers its call, data appends a part;
// - the last snapshot of a run (run_status not "running") is authoritative:
//   it replaces everything, and later events of that run are dropped;
// - a subagent event (a delegate call's child run) counts in the parent run's
//   sequence like any other; the child's own event it carries is folded by
//   this same reducer into the child's state, kept per call (`subagents`),
//   with the child's run and sequences;
// - an error event not_found ends a run whose thread was deleted (there is no
//   final snapshot): the page says so (deleted) and later events are dropped.

import type {
  ActiveRun,
  DataEvent,
  ErrorEvent,
  ReasoningEvent,
  RunEvent,
  RunStatus,
  SnapshotEvent,
  SubagentEvent,
  ThreadSnapshot,
  TokenEvent,
  ToolCallEvent,
  ToolResultEvent,
  WireMessage,
  WireMessagePart,
  WireRepository,
  WireRepositoryItem,
  WireToolCallPart,
} from "./types";

export type FollowedRun = {
  id: string;
  /** The highest sequence applied (or already folded into a loaded snapshot). */
  lastSequence: number;
  status: RunStatus;
};

/** An error to show; `retry` when a Retry of the kept draft makes sense. */
export type RunError = { code: string; message: string; retry?: boolean };

/**
 * A delegate call's sub-agent: its child thread and run, and the child's
 * conversation as this reducer folds it (a ChatState of its own).
 */
export type SubagentState = { threadId: string; runId: string; chat: ChatState };

/** The key of a delegate call in ChatState.subagents. */
export function subagentKey(messageId: string, toolCallId: string): string {
  return `${messageId} ${toolCallId}`;
}

/** The service refused the page's answer to a waiting turn; n counts refusals. */
export type AnswerRefusal = { n: number; message: string };

export type ChatState = {
  repository: WireRepository;
  /** The run whose events are applied; null when none was seen. */
  run: FollowedRun | null;
  /** Runs whose events are stale: earlier runs this page followed. */
  retiredRuns: readonly string[];
  /** Error events by run id. */
  errors: Readonly<Record<string, RunError>>;
  /** A run request is in flight and its first snapshot has not arrived. */
  pending: boolean;
  /** An error that belongs to no message: a refused request, a lost stream. */
  notice: RunError | null;
  /** The thread was deleted while a run streamed (an error event not_found ended it). */
  deleted: boolean;
  /** Refused answers to waiting turns, by the turn's message id. */
  refusals: Readonly<Record<string, AnswerRefusal>>;
  /** Sub-agents by subagentKey(message id, tool call id). */
  subagents: Readonly<Record<string, SubagentState>>;
};

export type ChatAction =
  | { type: "load"; snapshot: ThreadSnapshot }
  | { type: "event"; event: RunEvent }
  /** A request is about to be sent; `message` is shown until the first snapshot. */
  | { type: "request"; message?: WireMessage; parentId: string | null; headId?: string | null }
  /** The request was refused before a stream started. */
  | { type: "request_failed"; error: RunError | null; messageId?: string; restoreHeadId?: string | null }
  /** The followed run's stream ended without its final snapshot. */
  | { type: "stream_lost"; error?: RunError }
  /** The user picked another branch (view state). */
  | { type: "set_head"; headId: string }
  /** Something to tell the user that belongs to no message (a failed upload, head report). */
  | { type: "notice"; error: RunError }
  /** The service refused an answer to the waiting turn messageId. */
  | { type: "answer_refused"; messageId: string; message: string }
  | { type: "dismiss_notice" }
  /** A sub-agent's thread as loaded (GET /threads/{child}/messages): after a reload, or to settle its end. */
  /** path: the keys of the calls a nested sub-agent is within, outermost first. */
  | { type: "subagent_load"; messageId: string; toolCallId: string; threadId: string; runId: string; snapshot: ThreadSnapshot; path?: readonly string[] };

export const emptyRepository: WireRepository = { headId: null, messages: [] };

export const initialChatState: ChatState = {
  repository: emptyRepository,
  run: null,
  retiredRuns: [],
  errors: {},
  pending: false,
  notice: null,
  deleted: false,
  refusals: {},
  subagents: {},
};

export function isRunning(state: ChatState): boolean {
  return state.pending || state.run?.status === "running";
}

export function chatReducer(state: ChatState, action: ChatAction): ChatState {
  switch (action.type) {
    case "load":
      return applyLoad(state, action.snapshot);
    case "event":
      return applyEvent(state, action.event);
    case "request": {
      let repository = state.repository;
      if (action.message) {
        repository = addMessage(repository, action.message, action.parentId);
      } else if (action.headId !== undefined) {
        repository = { ...repository, headId: action.headId };
      }
      return { ...state, repository, pending: true, notice: null };
    }
    case "request_failed": {
      let repository = state.repository;
      if (action.messageId) repository = removeMessage(repository, action.messageId);
      const restore = action.restoreHeadId;
      if (restore !== undefined && (restore === null || repository.messages.some((m) => m.message.id === restore))) {
        repository = { ...repository, headId: restore };
      }
      return { ...state, repository, pending: false, notice: action.error };
    }
    case "stream_lost": {
      return { ...state, pending: false, notice: action.error ?? state.notice };
    }
    case "set_head": {
      if (state.repository.headId === action.headId) return state;
      if (!state.repository.messages.some((m) => m.message.id === action.headId)) return state;
      return { ...state, repository: { ...state.repository, headId: action.headId } };
    }
    case "notice":
      return { ...state, notice: action.error };
    case "dismiss_notice":
      return state.notice ? { ...state, notice: null } : state;
    case "answer_refused": {
      const n = (state.refusals[action.messageId]?.n ?? 0) + 1;
      return { ...state, refusals: { ...state.refusals, [action.messageId]: { n, message: action.message } } };
    }
    case "subagent_load":
      return applySubagentLoad(state, action);
  }
}

function applySubagentLoad(state: ChatState, action: Extract<ChatAction, { type: "subagent_load" }>): ChatState {
  const [outer, ...rest] = action.path ?? [];
  if (outer !== undefined) {
    const within = state.subagents[outer];
    if (!within) return state;
    const chat = applySubagentLoad(within.chat, { ...action, path: rest });
    return chat === within.chat ? state : { ...state, subagents: { ...state.subagents, [outer]: { ...within, chat } } };
  }
  const key = subagentKey(action.messageId, action.toolCallId);
  const prev = state.subagents[key];
  const chat = chatReducer(prev?.chat ?? initialChatState, { type: "load", snapshot: action.snapshot });
  if (prev && chat === prev.chat) return state;
  const runId = action.snapshot.active_run?.run_id ?? prev?.runId ?? action.runId;
  return { ...state, subagents: { ...state.subagents, [key]: { threadId: action.threadId, runId, chat } } };
}

/**
 * Folds a child's event into the state of its delegate call, and marks the
 * call with where its child lives (the part's `subagent`) when it is not yet.
 */
function applySubagent(state: ChatState, event: SubagentEvent): ChatState {
  const ids = [event.message_id, event.tool_call_id, event.thread_id, event.child_run_id];
  if (ids.some((v) => typeof v !== "string" || v === "") || !event.event || typeof event.event !== "object") return state;
  const key = subagentKey(event.message_id, event.tool_call_id);
  const prev = state.subagents[key];
  // A call runs one child run; another run id starts its state afresh.
  const base = prev && prev.runId === event.child_run_id ? prev.chat : initialChatState;
  const chat = chatReducer(base, { type: "event", event: event.event });
  const sub: SubagentState = { threadId: event.thread_id, runId: event.child_run_id, chat };
  const subagents = prev && prev.chat === chat && prev.runId === sub.runId ? state.subagents : { ...state.subagents, [key]: sub };
  const repository = editRunning(state.repository, event, (content) => {
    const at = content.findIndex((p) => isToolCall(p, event.tool_call_id));
    if (at < 0) return null;
    const part = content[at] as WireToolCallPart;
    if (part.subagent?.thread_id === event.thread_id && part.subagent.run_id === event.child_run_id) return null;
    content[at] = { ...part, subagent: { thread_id: event.thread_id, run_id: event.child_run_id } };
    return content;
  });
  return { ...state, repository, subagents };
}

function applyLoad(state: ChatState, snapshot: ThreadSnapshot): ChatState {
  const repository = normalizeRepository(snapshot.messageRepository, snapshot.messages);
  const active: ActiveRun | null = snapshot.active_run;
  let run: FollowedRun | null = state.run;
  let retiredRuns = state.retiredRuns;
  if (active) {
    if (state.run && state.run.id === active.run_id) {
      // Same run: never go back below what was already applied.
      if (state.run.status !== "running" || state.run.lastSequence > active.sequence) {
        return state;
      }
    } else if (state.run) {
      retiredRuns = retire(retiredRuns, state.run.id);
    }
    if (retiredRuns.includes(active.run_id)) return state;
    run = { id: active.run_id, lastSequence: active.sequence, status: "running" };
  } else if (state.run && state.run.status === "running") {
    // The run ended between our last event and this snapshot.
    run = { ...state.run, status: "succeeded" };
  }
  return { ...state, repository, run, retiredRuns, pending: false };
}

function retire(retired: readonly string[], runId: string): readonly string[] {
  if (retired.includes(runId)) return retired;
  const next = [...retired, runId];
  return next.length > 100 ? next.slice(next.length - 100) : next;
}

function applyEvent(state: ChatState, event: RunEvent): ChatState {
  if (!event || typeof event !== "object" || typeof event.run_id !== "string") return state;
  if (typeof event.sequence !== "number") return state;
  if (state.retiredRuns.includes(event.run_id)) return state; // an older run

  let run = state.run;
  let retiredRuns = state.retiredRuns;
  if (run && run.id === event.run_id) {
    if (run.status !== "running") return state; // after the authoritative snapshot
    if (event.sequence <= run.lastSequence) return state; // duplicate or out of order
  } else {
    // A run not seen before. Only its snapshot can introduce it: a token or an
    // error cannot be placed without one.
    if (event.type !== "snapshot") return state;
    if (run) retiredRuns = retire(retiredRuns, run.id);
    run = { id: event.run_id, lastSequence: 0, status: "running" };
  }
  run = { ...run, lastSequence: event.sequence };

  switch (event.type) {
    case "snapshot":
      return applySnapshot({ ...state, retiredRuns }, run, event);
    case "token":
      return { ...state, retiredRuns, run, repository: applyToken(state.repository, event) };
    case "error":
      if (event.code === "not_found") return applyDeleted({ ...state, retiredRuns, run }, event);
      return applyError({ ...state, retiredRuns, run }, event);
    case "reasoning":
      return { ...state, retiredRuns, run, repository: applyToken(state.repository, event) };
    case "tool_call":
      return { ...state, retiredRuns, run, repository: applyToolCall(state.repository, event) };
    case "tool_result":
      return { ...state, retiredRuns, run, repository: applyToolResult(state.repository, event) };
    case "data":
      return { ...state, retiredRuns, run, repository: applyData(state.repository, event) };
    case "subagent":
      return applySubagent({ ...state, retiredRuns, run }, event);
    default:
      // An event type this client does not know: consume its sequence.
      return { ...state, retiredRuns, run };
  }
}

function applySnapshot(state: ChatState, run: FollowedRun, event: SnapshotEvent): ChatState {
  const status: RunStatus = event.run_status ?? "running";
  let repository: WireRepository;
  if (event.messageRepository) {
    repository = normalizeRepository(event.messageRepository, event.messages);
  } else {
    repository = mergePath(state.repository, event.messages ?? []);
  }
  return {
    ...state,
    repository,
    run: { ...run, status },
    pending: false,
    // A refused send's notice stays (its Retry); others end with the run's news.
    notice: state.notice?.retry ? state.notice : null,
  };
}

/**
 * Applies `edit` to the content of the running assistant message an event
 * names, when that message belongs to the event's run; otherwise nothing.
 */
function editRunning(
  repository: WireRepository,
  event: { run_id: string; message_id: string },
  edit: (content: WireMessagePart[]) => WireMessagePart[] | null,
): WireRepository {
  const index = repository.messages.findIndex((m) => m.message.id === event.message_id);
  if (index < 0) return repository;
  const item = repository.messages[index]!;
  const message = item.message;
  if (message.role !== "assistant") return repository;
  if (message.status && message.status.type !== "running") return repository;
  const owner = runIdOf(message);
  if (owner && owner !== event.run_id) return repository;
  const content = edit(withoutEmptyText([...message.content]));
  if (!content) return repository;
  const messages = repository.messages.slice();
  messages[index] = { ...item, message: { ...message, content, status: { type: "running" } } };
  return { ...repository, messages };
}

/** Drops a trailing empty text part: a running reply's placeholder. */
function withoutEmptyText(content: WireMessagePart[]): WireMessagePart[] {
  const last = content[content.length - 1];
  if (last && last.type === "text" && (last as { text?: unknown }).text === "") content.pop();
  return content;
}

/** Extends the last part when it has `type`, else opens a new one. */
function appendText(content: WireMessagePart[], type: "text" | "reasoning", text: string): WireMessagePart[] {
  const last = content[content.length - 1];
  if (last && last.type === type && typeof (last as { text?: unknown }).text === "string") {
    content[content.length - 1] = { type, text: (last as { text: string }).text + text };
  } else {
    content.push({ type, text });
  }
  return content;
}

function applyToken(repository: WireRepository, event: TokenEvent | ReasoningEvent): WireRepository {
  if (typeof event.text !== "string" || event.text === "") return repository;
  const type = event.type === "token" ? "text" : "reasoning";
  return editRunning(repository, event, (content) => appendText(content, type, event.text));
}

function isToolCall(p: WireMessagePart, id: string): p is WireToolCallPart {
  return p.type === "tool-call" && (p as { toolCallId?: unknown }).toolCallId === id;
}

/** Parses a complete argsText; partial JSON while it streams gives undefined. */
function parseArgs(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function applyToolCall(repository: WireRepository, event: ToolCallEvent): WireRepository {
  if (typeof event.tool_call_id !== "string" || typeof event.args_text !== "string") return repository;
  return editRunning(repository, event, (content) => {
    const at = content.findIndex((p) => isToolCall(p, event.tool_call_id));
    const prev = at >= 0 ? (content[at] as WireToolCallPart) : null;
    const argsText = (prev?.argsText ?? "") + event.args_text;
    const args = parseArgs(argsText);
    const part: WireToolCallPart = {
      type: "tool-call",
      toolCallId: event.tool_call_id,
      toolName: prev?.toolName ?? String(event.tool_name ?? ""),
      argsText,
      ...(args ? { args } : {}),
    };
    if (at >= 0) content[at] = part;
    else content.push(part);
    return content;
  });
}

function applyToolResult(repository: WireRepository, event: ToolResultEvent): WireRepository {
  if (typeof event.tool_call_id !== "string") return repository;
  return editRunning(repository, event, (content) => {
    const at = content.findIndex((p) => isToolCall(p, event.tool_call_id));
    if (at < 0) return null;
    const prev = content[at] as WireToolCallPart;
    content[at] = { ...prev, result: event.result, isError: event.is_error === true };
    return content;
  });
}

function applyData(repository: WireRepository, event: DataEvent): WireRepository {
  if (typeof event.name !== "string") return repository;
  return editRunning(repository, event, (content) => {
    content.push({ type: "data", name: event.name, data: event.data });
    return content;
  });
}

/** What the page says when the thread was deleted under a running reply. */
export const deletedNotice: RunError = { code: "not_found", message: "This conversation was deleted." };

/**
 * The stream of a thread deleted while its run streamed ends with an error
 * event not_found and no final snapshot (docs/api.md, "Events"): the run is
 * over, nothing of it comes later, and the page says the conversation was
 * deleted instead of rejoining.
 */
function applyDeleted(state: ChatState, event: ErrorEvent): ChatState {
  const next = applyError(state, event);
  // Not running any more: later events of the run are dropped. The run has no
  // status of its own (it is gone); cancelled is the nearest.
  const run = next.run ? { ...next.run, status: "cancelled" as const } : null;
  return { ...next, run, pending: false, deleted: true, notice: deletedNotice };
}

function applyError(state: ChatState, event: ErrorEvent): ChatState {
  const error: RunError = {
    code: typeof event.code === "string" ? event.code : "error",
    message: typeof event.error === "string" ? event.error : String(event.error),
  };
  // Mark the run's running message as failed until the final snapshot says more.
  const messages = state.repository.messages.map((item) => {
    const m = item.message;
    if (m.role !== "assistant" || m.status?.type !== "running" || runIdOf(m) !== event.run_id) {
      return item;
    }
    return {
      ...item,
      message: {
        ...m,
        status: { type: "incomplete" as const, reason: "error", error: error.message },
      },
    };
  });
  return {
    ...state,
    repository: { ...state.repository, messages },
    errors: { ...state.errors, [event.run_id]: error },
  };
}

export function runIdOf(message: WireMessage): string | undefined {
  const meta = message.metadata;
  if (!meta) return undefined;
  const custom = meta.custom?.runId;
  if (typeof custom === "string" && custom) return custom;
  return typeof meta.runId === "string" && meta.runId ? meta.runId : undefined;
}

/** Repairs what a careless producer could send: a headId that is missing. */
function normalizeRepository(repo: WireRepository | undefined, path: WireMessage[] | undefined): WireRepository {
  if (!repo || !Array.isArray(repo.messages)) {
    return pathToRepository(path ?? []);
  }
  const messages = repo.messages.filter((m) => m && m.message && typeof m.message.id === "string");
  let headId = repo.headId ?? null;
  if (headId === null || !messages.some((m) => m.message.id === headId)) {
    headId = path?.at(-1)?.id ?? messages.at(-1)?.message.id ?? null;
  }
  return { headId, messages };
}

function pathToRepository(path: WireMessage[]): WireRepository {
  const messages: WireRepositoryItem[] = path.map((message, i) => ({
    message,
    parentId: i === 0 ? null : path[i - 1]!.id,
  }));
  return { headId: path.at(-1)?.id ?? null, messages };
}

/** Folds an interim snapshot's root-to-head path into the tree. */
function mergePath(repository: WireRepository, path: WireMessage[]): WireRepository {
  if (path.length === 0) return repository;
  const messages = repository.messages.slice();
  const indexById = new Map(messages.map((m, i) => [m.message.id, i] as const));
  path.forEach((message, i) => {
    const parentId = i === 0 ? null : path[i - 1]!.id;
    const at = indexById.get(message.id);
    if (at === undefined) {
      indexById.set(message.id, messages.length);
      messages.push({ message, parentId });
    } else {
      messages[at] = { message, parentId: messages[at]!.parentId };
    }
  });
  return { headId: path.at(-1)!.id, messages };
}

function addMessage(repository: WireRepository, message: WireMessage, parentId: string | null): WireRepository {
  const messages = repository.messages.filter((m) => m.message.id !== message.id);
  messages.push({ message, parentId });
  return { headId: message.id, messages };
}

function removeMessage(repository: WireRepository, id: string): WireRepository {
  const item = repository.messages.find((m) => m.message.id === id);
  if (!item) return repository;
  const messages = repository.messages.filter((m) => m.message.id !== id && m.parentId !== id);
  let headId = repository.headId;
  if (headId === id) {
    headId = item.parentId ?? lastLeaf(messages);
  }
  return { headId, messages };
}

function lastLeaf(messages: WireRepositoryItem[]): string | null {
  const parents = new Set(messages.map((m) => m.parentId));
  for (let i = messages.length - 1; i >= 0; i--) {
    if (!parents.has(messages[i]!.message.id)) return messages[i]!.message.id;
  }
  return null;
}

/** The root-to-head path of a repository. */
export function visiblePath(repository: WireRepository): WireMessage[] {
  const byId = new Map(repository.messages.map((m) => [m.message.id, m] as const));
  const path: WireMessage[] = [];
  let id = repository.headId;
  const seen = new Set<string>();
  while (id !== null && !seen.has(id)) {
    seen.add(id);
    const item = byId.get(id);
    if (!item) break;
    path.push(item.message);
    id = item.parentId;
  }
  return path.reverse();
}

/** The text of a message's text parts. */
export function messageText(message: WireMessage): string {
  return message.content
    .filter((p): p is { type: "text"; text: string } => p.type === "text" && typeof (p as { text?: unknown }).text === "string")
    .map((p) => p.text)
    .join("");
}
