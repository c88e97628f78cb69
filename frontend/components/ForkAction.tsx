"use client";

// "Fork into new chat" on a message: a new thread holding the path from the
// root to this message (POST /threads/{id}/fork), opened at once.

import { useAuiState } from "@assistant-ui/react";
import { useRouter } from "next/navigation";
import { useContext, useState, type FC } from "react";
import { announceThreadsChanged } from "@/lib/api";
import { forkThread } from "@/lib/chatSettings";
import { ThreadIdContext } from "./context";

export const ForkButton: FC = () => {
  const threadId = useContext(ThreadIdContext);
  const messageId = useAuiState((s) => s.message.id);
  const running = useAuiState((s) => s.thread.isRunning);
  const router = useRouter();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  if (!threadId) return null;
  const fork = async () => {
    setBusy(true);
    setError(null);
    try {
      const id = await forkThread(threadId, messageId);
      announceThreadsChanged();
      router.push(`/chat/${id}`);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
      setBusy(false);
    }
  };
  return (
    <>
      <button
        type="button"
        className="link"
        data-testid="fork-chat"
        disabled={busy || running}
        onClick={() => void fork()}
        title="A new chat holding the conversation up to this message"
      >
        Fork into new chat
      </button>
      {error ? (
        <span className="fork-error" role="alert">
          Could not fork: {error}
        </span>
      ) : null}
    </>
  );
};
