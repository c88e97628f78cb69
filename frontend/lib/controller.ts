// The chat page's controller: owns the reducer's state (lib/reducer.ts) as an
// external store (subscribe/getState, for useSyncExternalStore) and every
// request and stream of one thread. No React here: the component reads the
// state and calls the methods; nothing is assigned during render.

import { cachedSettings, runConfigOf } from "./chatSettings";
import { MessageNotSentError, type AppendMessage, type CompleteAttachment } from "@assistant-ui/react";
import {
  ApiError,
  announceThreadsChanged,
  cancelRun,
  getSelectedModel,
  getSnapshot,
  handoffKey,
  listTools,
  newId,
  putHead,
  rejoinRunStream,
  startRunStream,
  type Handoff,
} from "./api";
import { fromHandoffAttachments } from "./attachments";
import { describeError } from "./errors";
import { OUTAGE, OUTAGE_CODE, backoff, isOutage } from "./outage";
import { readNdjson } from "./ndjson";
import { chatReducer, deletedNotice, initialChatState, isRunning, type ChatAction, type ChatState } from "./reducer";
import { continuation, runTools, type ToolAnswer } from "./tools";
import type { RunEvent, RunRequest, WireAttachment, WireMessage } from "./types";

// The server's tool names, asked once per page load: a run declares them with
// the app's client tools. null: the service lists no tools (none declared).
let serverTools: Promise<string[] | null> | null = null;

function serverToolNames(): Promise<string[] | null> {
  serverTools ??= listTools()
    .then((tools) => (tools ? tools.map((t) => t.name) : null))
    .catch(() => {
      serverTools = null; // asked again by the next run
      return null;
    });
  return serverTools;
}

/** notFound: the thread does not exist and this page has sent nothing to it. */
export type ControllerState = { chat: ChatState; loaded: boolean; notFound: boolean };

const MAX_RESYNC = 6;
/** How long a send made while the thread is still loading waits for it. */
const SEND_LOAD_WAIT_MS = 15_000;

/** Why an answer to a waiting turn was not taken: the conversation went on below it. */
export const STALE_TURN = "This question was not answered; the conversation moved on.";

// A handoff survives a remount of the same page (React may mount twice) until
// its request got an answer; a reload starts without it.
const handoffsInFlight = new Map<string, Handoff>();

function takeHandoff(threadId: string): Handoff | null {
  const inFlight = handoffsInFlight.get(threadId);
  if (inFlight) return inFlight;
  let raw: string | null = null;
  try {
    raw = window.sessionStorage.getItem(handoffKey(threadId));
    window.sessionStorage.removeItem(handoffKey(threadId));
  } catch {
    return null;
  }
  if (!raw) return null;
  try {
    const h = JSON.parse(raw) as Handoff;
    if (typeof h.text !== "string" || typeof h.messageId !== "string") return null;
    handoffsInFlight.set(threadId, h);
    return h;
  } catch {
    return null;
  }
}

function textOf(message: AppendMessage): string {
  return message.content
    .filter((p): p is { type: "text"; text: string } => p.type === "text")
    .map((p) => p.text)
    .join("");
}

function optimisticUser(id: string, text: string, attachments: readonly CompleteAttachment[]): WireMessage {
  return {
    id,
    role: "user",
    content: [{ type: "text", text }],
    createdAt: new Date().toISOString(),
    attachments: attachments.map(
      (a): WireAttachment => ({
        id: a.id,
        type: a.type,
        name: a.name,
        ...(a.contentType ? { contentType: a.contentType } : {}),
        content: a.content,
        status: { type: "complete" },
      }),
    ),
    metadata: { custom: { optimistic: true } },
  };
}

type Optimistic = { message: WireMessage; parentId: string | null };

/** What a refused send was, so that its Retry reuses the message id. */
type Refused = { id: string; text: string; parentId: string | null };

export class ThreadController {
  private state: ControllerState = { chat: initialChatState, loaded: false, notFound: false };
  private readonly listeners = new Set<() => void>();
  private notifyScheduled = false;
  private stream: AbortController | null = null;
  private generation = 0;
  private cancelWanted = false;
  /** Highest sequence seen per run, so a resync never asks for events twice. */
  private seen: { runId: string; sequence: number } | null = null;
  private refused: Refused | null = null;
  /** Failed attempts to reach the service in a row, for the backoff. */
  private outages = 0;
  /** Gives a refused first message (from the welcome page) to the composer. */
  private returnDraft: ((text: string, attachments: readonly CompleteAttachment[]) => void) | null = null;
  /** Answers given to a waiting turn's calls, by assistant message id, until it continues. */
  private readonly answers = new Map<string, Map<string, ToolAnswer>>();
  /**
   * The first load's outcome so far: "pending" until the snapshot is in, or
   * "failed" once an attempt failed or a run took over. Only a pending load
   * makes a send wait (see parentOnceLoaded).
   */
  private firstLoad: "pending" | "in" | "failed" = "pending";
  /** Sends made while the first load is pending, waiting for its outcome. */
  private loadWaiters: ((loaded: boolean) => void)[] = [];

  constructor(readonly threadId: string) {}

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  getState = (): ControllerState => this.state;

  private dispatch(action: ChatAction): void {
    const chat = chatReducer(this.state.chat, action);
    if (chat === this.state.chat) return;
    this.setState({ ...this.state, chat });
  }

  private setState(next: ControllerState): void {
    this.state = next;
    // Coalesced: a chunk of the stream carries many events, folded one by one
    // in microtasks; the page renders once for all of them, not per token.
    if (this.notifyScheduled) return;
    this.notifyScheduled = true;
    setTimeout(() => {
      this.notifyScheduled = false;
      for (const l of this.listeners) l();
    }, 0);
  }

  private setLoaded(): void {
    if (!this.state.loaded) this.setState({ ...this.state, loaded: true });
  }

  /** The first load ended (the snapshot is in, or an attempt failed): waiting sends go on. */
  private settleFirstLoad(outcome: "in" | "failed"): void {
    if (this.firstLoad !== "pending") return;
    this.firstLoad = outcome;
    for (const w of this.loadWaiters.splice(0)) w(outcome === "in");
  }

  /**
   * Resolves true once the first load brought the snapshot; false at once
   * when an attempt already failed, when the next one fails, or after ms.
   */
  private firstLoadIn(ms: number): Promise<boolean> {
    if (this.firstLoad !== "pending") return Promise.resolve(this.firstLoad === "in");
    return new Promise((resolve) => {
      const done = (loaded: boolean) => {
        clearTimeout(timer);
        resolve(loaded);
      };
      const timer = setTimeout(() => {
        this.loadWaiters = this.loadWaiters.filter((w) => w !== done);
        resolve(false);
      }, ms);
      this.loadWaiters.push(done);
    });
  }

  /**
   * The parent of a new message sent while the thread may still be loading.
   * After a reload the composer can take a message before the snapshot is
   * in: it saw no messages, so its parent says nothing. Such a send waits for
   * the load in flight and answers the shown branch, not a new root. When an
   * attempt failed (an outage), it goes at once as it was and fails or
   * succeeds in words of its own.
   */
  private async parentOnceLoaded(parentId: string | null, sourceId: string | null): Promise<string | null> {
    if (parentId !== null || sourceId || this.firstLoad === "failed") return parentId;
    if (this.firstLoad === "pending" && !(await this.firstLoadIn(SEND_LOAD_WAIT_MS))) return parentId;
    return this.state.chat.repository.headId;
  }

  /** Starts the page: the welcome page's handoff, else the snapshot and a rejoin. */
  start(): void {
    const handoff = takeHandoff(this.threadId);
    if (handoff) {
      this.setLoaded();
      this.settleFirstLoad("in"); // the page shows what it sent; nothing to wait for
      const attachments = fromHandoffAttachments(handoff.attachments);
      const message = optimisticUser(handoff.messageId, handoff.text, attachments);
      const ids = attachments.length ? { attachments: attachments.map((a) => ({ id: a.id })) } : {};
      this.run({ message: { id: handoff.messageId, content: handoff.text, ...ids }, parent_message_id: null }, { message, parentId: null }).catch(
        () => {
          // Nothing took the text yet: it goes back to the composer for a Retry.
          this.refused = { id: handoff.messageId, text: handoff.text, parentId: null };
          this.returnDraft?.(handoff.text, attachments);
        },
      );
      return;
    }
    void this.resync(1).finally(() => this.setLoaded());
  }

  /** Stops following (the page goes away or remounts). */
  stop(): void {
    this.stopStream();
  }

  /** Where a refused first message goes (the composer); returns the unsetter. */
  setDraftSink(sink: (text: string, attachments: readonly CompleteAttachment[]) => void): () => void {
    this.returnDraft = sink;
    return () => {
      if (this.returnDraft === sink) this.returnDraft = null;
    };
  }

  private stopStream(): void {
    this.generation++;
    this.stream?.abort();
    this.stream = null;
  }

  /**
   * A new message, or an edit of one (message.sourceId names the edited
   * message). Resolves once the service accepted the run; rejects with
   * MessageNotSentError when it was refused, which hands the draft back to
   * the composer.
   */
  send = async (message: AppendMessage): Promise<void> => {
    const text = textOf(message);
    const attachments = message.attachments ?? [];
    const sourceId = message.sourceId ?? null;
    const parentId = await this.parentOnceLoaded(message.parentId ?? null, sourceId);
    // A retry of the refused message is the same request: same message id.
    const r = this.refused;
    const id = r && !sourceId && r.text === text && r.parentId === parentId ? r.id : newId();
    this.refused = null;
    try {
      await this.run(
        {
          message: {
            id,
            content: text,
            ...(attachments.length ? { attachments: attachments.map((a) => ({ id: a.id })) } : {}),
          },
          parent_message_id: parentId,
          ...(sourceId ? { source_message_id: sourceId } : {}),
        },
        { message: optimisticUser(id, text, attachments), parentId },
      );
    } catch (err) {
      this.refused = { id, text, parentId };
      // Sent during an outage before the thread was in: the send took the
      // page over from the load, which goes on (keeping this send's notice)
      // so that the thread shows once the service is back.
      if (this.firstLoad !== "in" && isOutage(err)) void this.resync(1);
      throw new MessageNotSentError();
    }
  };

  /** Regenerates the reply below parentId, with another model when given. */
  reload = async (parentId: string | null, sourceId: string | null, model?: string): Promise<void> => {
    await this.run({ parent_message_id: parentId, source_message_id: sourceId }, undefined, parentId, model).catch(() => {
      /* the notice says why */
    });
  };

  cancel = async (): Promise<void> => {
    const s = this.state.chat;
    if (s.run && s.run.status === "running") {
      try {
        await cancelRun(this.threadId, s.run.id);
      } catch (err) {
        this.dispatch({ type: "notice", error: describeError(err) });
      }
    } else if (s.pending) {
      this.cancelWanted = true;
    }
  };

  /** A branch switch: records the new head and reports it. */
  setHead = (head: string | undefined): void => {
    const s = this.state.chat;
    if (!head || head === s.repository.headId || isRunning(s)) return;
    if (!s.repository.messages.some((m) => m.message.id === head)) return;
    this.dispatch({ type: "set_head", headId: head });
    putHead(this.threadId, head).catch((err: unknown) => this.dispatch({ type: "notice", error: describeError(err) }));
  };

  notice = (error: { code: string; message: string }): void => this.dispatch({ type: "notice", error });

  /**
   * Records the person's answer to a waiting call (a client tool's result or
   * an approval). Once every waiting call of the turn has one, continues the
   * turn in one request; a refused continuation forgets the answers, so the
   * controls come back.
   */
  answer = async (messageId: string, answer: ToolAnswer): Promise<void> => {
    const repository = this.state.chat.repository;
    const message = repository.messages.find((m) => m.message.id === messageId)?.message;
    if (!message) return;
    // Something follows the turn: the service would refuse the answer.
    if (repository.messages.some((m) => m.parentId === messageId)) {
      this.answers.delete(messageId);
      this.dispatch({ type: "answer_refused", messageId, message: STALE_TURN });
      return;
    }
    const given = this.answers.get(messageId) ?? new Map<string, ToolAnswer>();
    given.set(answer.toolCallId, answer);
    this.answers.set(messageId, given);
    const body = continuation(message, given);
    if (!body) return;
    this.answers.delete(messageId);
    await this.run(body, undefined, messageId).catch((err: unknown) => {
      // The notice says why; the card gets its controls back, or learns from
      // the snapshot that the conversation moved on below it.
      const moved = err instanceof ApiError && err.code === "invalid_fork";
      this.dispatch({ type: "answer_refused", messageId, message: moved ? STALE_TURN : describeError(err).message });
      if (moved) void this.resync(1);
    });
  };

  /** The assistant message holding a tool call, for approvals (addressed by call id). */
  messageOfCall = (toolCallId: string): string | undefined =>
    this.state.chat.repository.messages.find(({ message }) =>
      message.content.some((p) => p.type === "tool-call" && (p as { toolCallId?: unknown }).toolCallId === toolCallId),
    )?.message.id;

  dismissNotice = (): void => this.dispatch({ type: "dismiss_notice" });

  /**
   * Sends a run request and follows its stream. Resolves when the service
   * accepted it (the stream started), rejects when it was refused.
   */
  private run(body: RunRequest, optimistic?: Optimistic, headId?: string | null, model?: string): Promise<void> {
    if (this.state.chat.deleted) {
      // A run on a deleted thread's id would make a new thread under it.
      this.dispatch({ type: "notice", error: deletedNotice });
      return Promise.reject(new Error(deletedNotice.message));
    }
    this.cancelWanted = false;
    // A run takes the page over from a load in flight (whose answer is then
    // dropped): sends made after it go as they are.
    this.settleFirstLoad("failed");
    const restoreHeadId = this.state.chat.repository.headId;
    this.dispatch({
      type: "request",
      ...(optimistic ? { message: optimistic.message, parentId: optimistic.parentId } : { parentId: null }),
      ...(headId !== undefined ? { headId } : {}),
    });
    const chosen = model ?? getSelectedModel();
    return new Promise<void>((accepted, refused) => {
      void this.follow(
        async (signal) => {
          const tools = runTools(await serverToolNames());
          // Per-chat settings (lib/chatSettings); a "regenerate with" model wins over the chat's, the chat's over the picker's.
          const settings = cachedSettings(this.threadId);
          const pick = model ?? settings.model ?? chosen;
          const runConfig = { ...runConfigOf(settings), ...(pick ? { model: pick } : {}), ...(tools ? { tools } : {}) };
          const request: RunRequest = {
            on_disconnect: "continue",
            ...body,
            ...(Object.keys(runConfig).length ? { run_config: runConfig } : {}),
          };
          return startRunStream(this.threadId, request, signal);
        },
        {
          onOpen: () => accepted(),
          onRefused: (err) => {
            handoffsInFlight.delete(this.threadId);
            const messageId = optimistic?.message.id;
            const error = describeError(err, { retry: !!optimistic });
            if (err instanceof ApiError && err.status === 409 && error.code !== "run_in_progress") {
              // This very message was already sent: show what the service has.
              this.dispatch({ type: "request_failed", ...(messageId ? { messageId } : {}), restoreHeadId, error: null });
              void this.resync(1);
              accepted();
              return true;
            }
            this.dispatch({ type: "request_failed", ...(messageId ? { messageId } : {}), restoreHeadId, error });
            // Busy (another tab's run): show that run while the draft waits.
            if (error.code === "run_in_progress") void this.resync(1);
            refused(err instanceof Error ? err : new Error(String(err)));
            return true;
          },
        },
      );
    });
  }

  /** Opens a stream and folds its events until it ends. */
  private async follow(
    open: (signal: AbortSignal) => Promise<Response>,
    opts: { onOpen?: () => void; onRefused?: (err: unknown) => boolean; attempt?: number } = {},
  ): Promise<void> {
    const attempt = opts.attempt ?? 0;
    this.stopStream();
    const ctrl = new AbortController();
    this.stream = ctrl;
    const gen = this.generation;
    let res: Response;
    try {
      res = await open(ctrl.signal);
    } catch (err) {
      if (ctrl.signal.aborted || gen !== this.generation) return;
      if (opts.onRefused?.(err)) return;
      this.dispatch({ type: "stream_lost", error: describeError(err) });
      return;
    }
    opts.onOpen?.();
    const { final, received, lost } = await this.consume(res, ctrl, gen);
    if (gen !== this.generation) return;
    this.stream = null;
    if (!final) {
      // The connection ended before the run did: rejoin it from the log.
      // A stream that brought nothing counts as a failed attempt.
      await this.resync(received > 0 ? 1 : attempt + 1).catch(() => {});
      if (lost && gen === this.generation) this.dispatch({ type: "stream_lost" });
    }
  }

  private async consume(
    res: Response,
    ctrl: AbortController,
    gen: number,
  ): Promise<{ final: boolean; received: number; lost: boolean }> {
    let final = false;
    let received = 0;
    try {
      for await (const event of readNdjson<RunEvent>(res.body!)) {
        if (gen !== this.generation) return { final, received, lost: false };
        if (!event || typeof event !== "object") continue;
        received++;
        this.dispatch({ type: "event", event });
        this.noteSequence(event);
        if (event.type === "error" && event.code === "not_found") {
          // The thread was deleted: the stream's last event. Nothing to rejoin.
          final = true;
          announceThreadsChanged();
        }
        if (event.type === "snapshot") {
          handoffsInFlight.delete(this.threadId);
          // A new thread (or a new title) shows in the sidebar without polling.
          if (received === 1) announceThreadsChanged();
          if (event.run_status !== "running") {
            final = true;
            announceThreadsChanged();
          } else if (this.cancelWanted) {
            this.cancelWanted = false;
            void cancelRun(this.threadId, event.run_id).catch(() => {});
          }
        }
      }
    } catch {
      return { final, received, lost: !(ctrl.signal.aborted || gen !== this.generation) };
    }
    return { final, received, lost: false };
  }

  private noteSequence(event: RunEvent): void {
    if (typeof event.run_id !== "string" || typeof event.sequence !== "number") return;
    const s = this.seen;
    if (!s || s.runId !== event.run_id || event.sequence > s.sequence) {
      this.seen = { runId: event.run_id, sequence: event.sequence };
    }
  }

  /**
   * The service cannot be reached: the page says so unless a refused send
   * already does (a thread not loaded yet stays "loading", not an empty
   * chat), then asks again with backoff,
   * as long as nothing else took over.
   */
  private async waitOutOutage(gen: number): Promise<void> {
    // A refused send's notice (its words and its Retry) stays.
    const keep = this.state.chat.notice?.retry === true;
    this.dispatch({ type: "stream_lost", ...(keep ? {} : { error: { code: OUTAGE_CODE, message: OUTAGE } }) });
    await new Promise((r) => setTimeout(r, backoff(this.outages++)));
    if (gen !== this.generation) return;
    return this.resync(1);
  }

  /** Loads the thread's snapshot and rejoins its active run, if any. */
  private async resync(attempt: number): Promise<void> {
    if (attempt > MAX_RESYNC) {
      this.dispatch({
        type: "stream_lost",
        error: { code: "stream_lost", message: "Lost the connection to the reply. Reload to see it." },
      });
      return;
    }
    if (attempt > 1) await new Promise((r) => setTimeout(r, 300 * attempt));
    const gen = this.generation;
    let snapshot;
    try {
      snapshot = await getSnapshot(this.threadId);
    } catch (err) {
      if (gen !== this.generation) return;
      this.settleFirstLoad("failed");
      if (isOutage(err)) return this.waitOutOutage(gen);
      if (attempt < MAX_RESYNC && !(err instanceof ApiError && err.status < 500)) return this.resync(attempt + 1);
      this.dispatch({ type: "stream_lost", error: describeError(err) });
      return;
    }
    this.outages = 0;
    if (gen !== this.generation) return;
    this.settleFirstLoad("in");
    if (this.state.chat.notice?.code === OUTAGE_CODE) this.dispatch({ type: "dismiss_notice" });
    if (!snapshot) {
      const c = this.state.chat;
      if (c.repository.messages.length === 0 && !c.pending) this.setState({ ...this.state, notFound: true });
      this.dispatch({ type: "stream_lost" });
      return;
    }
    this.dispatch({ type: "load", snapshot });
    const active = snapshot.active_run;
    if (!active) return;
    const s = this.seen;
    const after = s && s.runId === active.run_id ? Math.max(s.sequence, active.sequence) : active.sequence;
    // Not awaited: the page is loaded once the snapshot is in.
    void this.follow((signal) => rejoinRunStream(this.threadId, active.run_id, after, signal), {
      attempt,
      onRefused: (err) => {
        // The run ended and its log is gone, or it is not ours: the snapshot stands.
        if (err instanceof ApiError && err.status === 404) {
          void this.resync(attempt + 1);
          return true;
        }
        return false;
      },
    });
  }
}
