"use client";

// The welcome page: a composer. Sending makes the thread id here, hands the
// first message to /chat/{id} through session storage (read once there) and
// navigates; the chat page sends it.

import { AssistantRuntimeProvider, useExternalStoreRuntime, type AppendMessage, type ThreadMessage } from "@assistant-ui/react";
import { useRouter } from "next/navigation";
import { useCallback, type FC } from "react";
import { handoffKey, newId, type Handoff } from "@/lib/api";
import { ModelPicker } from "./ModelPicker";
import { Starters } from "./Starters";
import { Composer } from "./Thread";
import { ThreadPrimitive } from "@assistant-ui/react";

const NO_MESSAGES: readonly ThreadMessage[] = [];

export const Welcome: FC = () => {
  const router = useRouter();
  const start = useCallback(
    (text: string) => {
      if (!text.trim()) return;
      const threadId = newId();
      const handoff: Handoff = { messageId: newId(), text };
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
      );
      return Promise.resolve();
    },
    [start],
  );
  const runtime = useExternalStoreRuntime<ThreadMessage>({ messages: NO_MESSAGES, onNew });
  return (
    <AssistantRuntimeProvider runtime={runtime}>
      <ThreadPrimitive.Root className="thread welcome">
        <div className="welcome-box">
          <h1>Threadline</h1>
          <p className="muted">Start a conversation. Every reply is kept as a branch you can come back to.</p>
          <div className="composer-toolbar">
            <ModelPicker />
          </div>
          <Composer placeholder="What's on your mind?" attachments={false} />
          <Starters onPick={start} />
        </div>
      </ThreadPrimitive.Root>
    </AssistantRuntimeProvider>
  );
};
