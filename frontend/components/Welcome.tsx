"use client";

// The welcome page: a composer. Sending makes the thread id here, hands the
// first message (its text and its attachments, uploaded when picked) to
// /chat/{id} through session storage (read once there) and navigates; the
// chat page sends it.

import {
  AssistantRuntimeProvider,
  ThreadPrimitive,
  useExternalStoreRuntime,
  type AppendMessage,
  type ThreadMessage,
} from "@assistant-ui/react";
import { useRouter } from "next/navigation";
import { useCallback, useMemo, useState, type FC } from "react";
import { handoffKey, newId, type Handoff, type HandoffAttachment } from "@/lib/api";
import { UploadAttachmentAdapter, toHandoffAttachments } from "@/lib/attachments";
import type { RunError } from "@/lib/reducer";
import { ModelPicker } from "./ModelPicker";
import { Starters } from "./Starters";
import { AttachRefusals, Composer, DropZone } from "./Thread";

const NO_MESSAGES: readonly ThreadMessage[] = [];

export const Welcome: FC = () => {
  const router = useRouter();
  const [notice, setNotice] = useState<RunError | null>(null);
  const start = useCallback(
    (text: string, attachments: HandoffAttachment[] = []) => {
      if (!text.trim() && attachments.length === 0) return;
      const threadId = newId();
      const handoff: Handoff = { messageId: newId(), text, ...(attachments.length ? { attachments } : {}) };
      window.sessionStorage.setItem(handoffKey(threadId), JSON.stringify(handoff));
      router.push(`/chat/${threadId}`);
    },
    [router],
  );
  const onNew = useCallback(
    (message: AppendMessage): Promise<void> => {
      start(
        message.content
          .filter((p): p is { type: "text"; text: string } => p.type === "text")
          .map((p) => p.text)
          .join(""),
        toHandoffAttachments(message.attachments),
      );
      return Promise.resolve();
    },
    [start],
  );
  const attachments = useMemo(() => new UploadAttachmentAdapter(setNotice), []);
  const runtime = useExternalStoreRuntime<ThreadMessage>({ messages: NO_MESSAGES, onNew, adapters: { attachments } });
  return (
    <AssistantRuntimeProvider runtime={runtime}>
      <ThreadPrimitive.Root className="thread welcome">
        <AttachRefusals onRefused={setNotice} />
        <DropZone className="welcome-drop">
          <div className="welcome-box">
            <h1>Threadline</h1>
            <p className="muted">Start a conversation. Every reply is kept as a branch you can come back to.</p>
            <div className="composer-toolbar">
              <ModelPicker />
            </div>
            {notice ? (
              <div className="notice" role="alert" data-testid="thread-notice">
                <span>
                  {notice.message}
                  {notice.code ? <code className="notice-code">{notice.code}</code> : null}
                </span>
                <button type="button" className="link" onClick={() => setNotice(null)} aria-label="Dismiss">
                  ×
                </button>
              </div>
            ) : null}
            <Composer placeholder="What's on your mind?" />
            <Starters onPick={(text) => start(text)} />
          </div>
        </DropZone>
      </ThreadPrimitive.Root>
    </AssistantRuntimeProvider>
  );
};
