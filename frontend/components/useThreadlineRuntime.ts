"use client";

// The chat page's runtime: the reducer's state (lib/reducer.ts) is the
// external store; assistant-ui gets the snapshot's messageRepository and
// keeps branches itself. Streams are read with lib/ndjson.ts.

import {
  useExternalStoreRuntime,
  type AppendMessage,
  type AttachmentAdapter,
  type CompleteAttachment,
  type PendingAttachment,
  type ThreadMessage,
} from "@assistant-ui/react";
import { useCallback, useEffect, useMemo, useReducer, useRef, useState } from "react";
import {
  ApiError,
  announceThreadsChanged,
  cancelRun,
  getSelectedModel,
  getSnapshot,
  handoffKey,
  newId,
  putHead,
  rejoinRunStream,
  startRunStream,
  uploadAttachment,
  type Handoff,
} from "@/lib/api";
import { toExportedRepository } from "@/lib/convert";
import { readNdjson } from "@/lib/ndjson";
import { chatReducer, initialChatState, isRunning, type RunError } from "@/lib/reducer";
import type { RunEvent, RunRequest, WireAttachment, WireMessage } from "@/lib/types";

/** A failed upload: already shown in the thread, so not an uncaught error. */
export class AttachmentUploadError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "AttachmentUploadError";
  }
}

// The composer rejects its send() when an attachment fails to upload (it
// keeps the draft), and the Send button does not catch that rejection.
if (typeof window !== "undefined") {
  window.addEventListener("unhandledrejection", (event) => {
    if (event.reason instanceof AttachmentUploadError) event.preventDefault();
  });
}

/** Uploads on send; the service's attachment id goes into the run request. */
export class UploadAttachmentAdapter implements AttachmentAdapter {
  accept = "image/*";

  constructor(private readonly onError?: (error: RunError) => void) {}

  async add({ file }: { file: File }): Promise<PendingAttachment> {
    return {
      id: newId(),
      type: "image",
      name: file.name,
      contentType: file.type,
      file,
      status: { type: "requires-action", reason: "composer-send" },
    };
  }

  async send(attachment: PendingAttachment): Promise<CompleteAttachment> {
    let uploaded;
    try {
      uploaded = await uploadAttachment(attachment.file);
    } catch (err) {
      const e = toRunError(err);
      const message = `Could not upload ${attachment.name}: ${e.message}`;
      this.onError?.({ code: e.code, message });
      throw new AttachmentUploadError(message, { cause: err });
    }
    return {
      id: uploaded.id,
      type: "image",
      name: uploaded.name,
      contentType: uploaded.contentType,
      status: { type: "complete" },
      content: [{ type: "image", image: uploaded.url }],
    };
  }

  async remove(): Promise<void> {}
}

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

function toRunError(err: unknown): RunError {
  if (err instanceof ApiError) return { code: err.code, message: err.message };
  if (err instanceof Error) return { code: "network_error", message: err.message };
  return { code: "error", message: String(err) };
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

const MAX_RESYNC = 6;

export function useThreadlineRuntime(threadId: string) {
  const [state, dispatch] = useReducer(chatReducer, initialChatState);
  const [loaded, setLoaded] = useState(false);
  const stateRef = useRef(state);
  stateRef.current = state;

  const streamRef = useRef<AbortController | null>(null);
  const generation = useRef(0);
  const cancelWanted = useRef(false);
  // Highest sequence seen per run, so a resync never asks for events twice.
  const seen = useRef<{ runId: string; sequence: number } | null>(null);

  const stopStream = useCallback(() => {
    generation.current++;
    streamRef.current?.abort();
    streamRef.current = null;
  }, []);

  const resyncRef = useRef<(attempt: number) => Promise<void>>(async () => {});

  /** Opens a stream and folds its events until it ends. */
  const follow = useCallback(
    async (
      open: (signal: AbortSignal) => Promise<Response>,
      onRefused?: (err: unknown) => boolean,
      attempt = 0,
    ): Promise<void> => {
      stopStream();
      const ctrl = new AbortController();
      streamRef.current = ctrl;
      const gen = generation.current;
      let res: Response;
      try {
        res = await open(ctrl.signal);
      } catch (err) {
        if (ctrl.signal.aborted || gen !== generation.current) return;
        if (onRefused?.(err)) return;
        dispatch({ type: "stream_lost", error: toRunError(err) });
        return;
      }
      let final = false;
      let received = 0;
      let lostError: RunError | undefined;
      try {
        for await (const event of readNdjson<RunEvent>(res.body!)) {
          if (gen !== generation.current) return;
          if (!event || typeof event !== "object") continue;
          received++;
          dispatch({ type: "event", event });
          if (typeof event.run_id === "string" && typeof event.sequence === "number") {
            const s = seen.current;
            if (!s || s.runId !== event.run_id || event.sequence > s.sequence) {
              seen.current = { runId: event.run_id, sequence: event.sequence };
            }
          }
          if (event.type === "snapshot") {
            handoffsInFlight.delete(threadId);
            if (event.run_status !== "running") {
              final = true;
              announceThreadsChanged();
            } else if (cancelWanted.current) {
              cancelWanted.current = false;
              void cancelRun(threadId, event.run_id).catch(() => {});
            }
          }
        }
      } catch (err) {
        if (ctrl.signal.aborted || gen !== generation.current) return;
        lostError = toRunError(err);
      }
      if (gen !== generation.current) return;
      streamRef.current = null;
      if (!final) {
        // The connection ended before the run did: rejoin it from the log.
        // A stream that brought nothing counts as a failed attempt.
        await resyncRef.current(received > 0 ? 1 : attempt + 1).catch(() => {});
        if (lostError && gen === generation.current) dispatch({ type: "stream_lost" });
      }
    },
    [stopStream, threadId],
  );

  /** Loads the thread's snapshot and rejoins its active run, if any. */
  const resync = useCallback(
    async (attempt: number): Promise<void> => {
      if (attempt > MAX_RESYNC) {
        dispatch({
          type: "stream_lost",
          error: { code: "stream_lost", message: "Lost the connection to the reply. Reload to see it." },
        });
        return;
      }
      if (attempt > 1) await new Promise((r) => setTimeout(r, 300 * attempt));
      const gen = generation.current;
      let snapshot;
      try {
        snapshot = await getSnapshot(threadId);
      } catch (err) {
        if (gen !== generation.current) return;
        if (attempt < MAX_RESYNC && !(err instanceof ApiError && err.status < 500)) return resync(attempt + 1);
        dispatch({ type: "stream_lost", error: toRunError(err) });
        return;
      }
      if (gen !== generation.current) return;
      if (!snapshot) {
        dispatch({ type: "stream_lost" });
        return;
      }
      dispatch({ type: "load", snapshot });
      const active = snapshot.active_run;
      if (!active) return;
      const s = seen.current;
      const after = s && s.runId === active.run_id ? Math.max(s.sequence, active.sequence) : active.sequence;
      // Not awaited: the page is loaded once the snapshot is in.
      void follow(
        (signal) => rejoinRunStream(threadId, active.run_id, after, signal),
        (err) => {
          // The run ended and its log is gone, or it is not ours: the snapshot stands.
          if (err instanceof ApiError && err.status === 404) {
            void resync(attempt + 1);
            return true;
          }
          return false;
        },
        attempt,
      );
    },
    [follow, threadId],
  );
  resyncRef.current = resync;

  /** Sends a run request and follows its stream. */
  const run = useCallback(
    (body: RunRequest, optimistic?: { message: WireMessage; parentId: string | null }, headId?: string | null) => {
      cancelWanted.current = false;
      const restoreHeadId = stateRef.current.repository.headId;
      dispatch({
        type: "request",
        ...(optimistic ? { message: optimistic.message, parentId: optimistic.parentId } : { parentId: null }),
        ...(headId !== undefined ? { headId } : {}),
      });
      const model = getSelectedModel();
      const request: RunRequest = { on_disconnect: "continue", ...body, ...(model ? { run_config: { model } } : {}) };
      void follow(
        (signal) => startRunStream(threadId, request, signal),
        (err) => {
          handoffsInFlight.delete(threadId);
          const error = toRunError(err);
          if (err instanceof ApiError && err.status === 409) {
            // Busy, or this very message was already sent: show what the service has.
            dispatch({
              type: "request_failed",
              ...(optimistic ? { messageId: optimistic.message.id } : {}),
              restoreHeadId,
              error: error.code === "run_in_progress" ? error : null,
            });
            void resync(1);
            return true;
          }
          dispatch({
            type: "request_failed",
            ...(optimistic ? { messageId: optimistic.message.id } : {}),
            restoreHeadId,
            error,
          });
          return true;
        },
      );
    },
    [follow, resync, threadId],
  );

  // Mount: hand-off from the welcome page, else the snapshot (and a rejoin).
  useEffect(() => {
    const handoff = takeHandoff(threadId);
    if (handoff) {
      setLoaded(true);
      run(
        { message: { id: handoff.messageId, content: handoff.text }, parent_message_id: null },
        { message: optimisticUser(handoff.messageId, handoff.text, []), parentId: null },
      );
    } else {
      resync(1).finally(() => setLoaded(true));
    }
    return () => stopStream();
  }, [threadId, run, resync, stopStream]);

  const onNew = useCallback(
    async (message: AppendMessage) => {
      const text = textOf(message);
      const attachments = message.attachments ?? [];
      const id = newId();
      const parentId = message.parentId ?? null;
      run(
        {
          message: {
            id,
            content: text,
            ...(attachments.length ? { attachments: attachments.map((a) => ({ id: a.id })) } : {}),
          },
          parent_message_id: parentId,
        },
        { message: optimisticUser(id, text, attachments), parentId },
      );
    },
    [run],
  );

  const onEdit = useCallback(
    async (message: AppendMessage) => {
      const text = textOf(message);
      const attachments = message.attachments ?? [];
      const id = newId();
      const parentId = message.parentId ?? null;
      run(
        {
          message: {
            id,
            content: text,
            ...(attachments.length ? { attachments: attachments.map((a) => ({ id: a.id })) } : {}),
          },
          parent_message_id: parentId,
          source_message_id: message.sourceId ?? null,
        },
        { message: optimisticUser(id, text, attachments), parentId },
      );
    },
    [run],
  );

  const onReload = useCallback(
    async (parentId: string | null, config: { sourceId?: string | null | undefined }) => {
      run({ parent_message_id: parentId, source_message_id: config.sourceId ?? null }, undefined, parentId);
    },
    [run],
  );

  const onCancel = useCallback(async () => {
    const s = stateRef.current;
    if (s.run && s.run.status === "running") {
      await cancelRun(threadId, s.run.id).catch((err) => {
        dispatch({ type: "notice", error: toRunError(err) });
      });
    } else if (s.pending) {
      cancelWanted.current = true;
    }
  }, [threadId]);

  const setMessages = useCallback(
    (messages: readonly ThreadMessage[]) => {
      const head = messages.at(-1)?.id;
      const s = stateRef.current;
      if (!head || head === s.repository.headId || isRunning(s)) return;
      if (!s.repository.messages.some((m) => m.message.id === head)) return;
      dispatch({ type: "set_head", headId: head });
      putHead(threadId, head).catch((err) => dispatch({ type: "notice", error: toRunError(err) }));
    },
    [threadId],
  );

  const attachmentAdapter = useMemo(
    () => new UploadAttachmentAdapter((error) => dispatch({ type: "notice", error })),
    [],
  );
  const messageRepository = useMemo(
    () => toExportedRepository(state.repository, state.errors),
    [state.repository, state.errors],
  );
  const running = isRunning(state);

  const runtime = useExternalStoreRuntime<ThreadMessage>({
    messageRepository,
    isRunning: running,
    isLoading: !loaded,
    onNew,
    onEdit,
    onReload,
    onCancel,
    setMessages,
    adapters: { attachments: attachmentAdapter },
  });

  const dismissNotice = useCallback(() => dispatch({ type: "dismiss_notice" }), []);
  return { runtime, notice: state.notice, dismissNotice, running, loaded };
}
