"use client";

// The chat page's runtime: lib/controller.ts owns the state (an external
// store read with useSyncExternalStore) and the requests; assistant-ui gets
// the snapshot's messageRepository and keeps branches itself.

import { useExternalStoreRuntime, type ThreadMessage } from "@assistant-ui/react";
import { useEffect, useMemo, useState, useSyncExternalStore } from "react";
import { UploadAttachmentAdapter } from "@/lib/attachments";
import { ThreadController } from "@/lib/controller";
import { toExportedRepository } from "@/lib/convert";
import { isRunning } from "@/lib/reducer";

export function useThreadlineRuntime(threadId: string) {
  // One controller per page; Chat is keyed by thread, so threadId is fixed.
  const [controller] = useState(() => new ThreadController(threadId));
  const { chat, loaded, notFound } = useSyncExternalStore(controller.subscribe, controller.getState, controller.getState);

  const attachmentAdapter = useMemo(() => new UploadAttachmentAdapter(controller.notice), [controller]);
  const messageRepository = useMemo(
    () => toExportedRepository(chat.repository, chat.errors, chat.refusals),
    [chat.repository, chat.errors, chat.refusals],
  );
  const running = isRunning(chat);

  const runtime = useExternalStoreRuntime<ThreadMessage>({
    messageRepository,
    isRunning: running,
    isLoading: !loaded,
    onNew: controller.send,
    onEdit: controller.send,
    onReload: (parentId, config) => controller.reload(parentId, config.sourceId ?? null, modelOf(config.runConfig)),
    onCancel: controller.cancel,
    setMessages: (messages) => controller.setHead(messages.at(-1)?.id),
    // A waiting agent turn: a client tool's result or an approval.
    onAddToolResult: ({ messageId, toolCallId, result, isError }) =>
      controller.answer(messageId, { kind: "result", toolCallId, result, isError }),
    onRespondToToolApproval: ({ approvalId, approved, optionId, reason }) => {
      const messageId = controller.messageOfCall(approvalId);
      if (!messageId) return;
      return controller.answer(messageId, {
        kind: "approval",
        toolCallId: approvalId,
        approved,
        ...(optionId ? { optionId } : {}),
        ...(reason ? { reason } : {}),
      });
    },
    adapters: { attachments: attachmentAdapter },
  });

  // A refused first message (from the welcome page) goes back to the composer.
  // Its attachments are uploads already: they go back as they are.
  useEffect(
    () =>
      controller.setDraftSink((text, attachments) => {
        const composer = runtime.thread.composer;
        composer.setText(text);
        for (const a of attachments) void composer.addAttachment(a).catch(() => {});
      }),
    [controller, runtime],
  );
  useEffect(() => {
    controller.start();
    return () => controller.stop();
  }, [controller]);

  return {
    runtime,
    notice: chat.notice,
    dismissNotice: controller.dismissNotice,
    notify: controller.notice,
    running,
    loaded,
    notFound,
    repository: chat.repository,
    setHead: controller.setHead,
  };
}

/** The model a "regenerate with…" asked for (runConfig.custom.model). */
function modelOf(runConfig: { custom?: Record<string, unknown> } | undefined): string | undefined {
  const m = runConfig?.custom?.model;
  return typeof m === "string" && m ? m : undefined;
}
