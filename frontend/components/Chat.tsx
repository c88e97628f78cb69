"use client";

import { AssistantRuntimeProvider } from "@assistant-ui/react";
import type { FC } from "react";
import { ModelPicker } from "./ModelPicker";
import { Thread } from "./Thread";
import { useThreadlineRuntime } from "./useThreadlineRuntime";

export const Chat: FC<{ threadId: string }> = ({ threadId }) => {
  const { runtime, notice, dismissNotice } = useThreadlineRuntime(threadId);
  return (
    <AssistantRuntimeProvider runtime={runtime}>
      <Thread notice={notice} onDismissNotice={dismissNotice} toolbar={<ModelPicker />} />
    </AssistantRuntimeProvider>
  );
};
