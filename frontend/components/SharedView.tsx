"use client";

// The page of a share link (/s/{shareId}): the shared path, read-only, with
// no sidebar and no sign-in, and "Continue this conversation", which copies
// the path into a new thread of the viewer's and opens it. The messages go
// through an external-store runtime with no onNew, so there is no composer
// and nothing to send; they render with the chat's own parts.

import {
  AssistantRuntimeProvider,
  MessagePrimitive,
  ThreadPrimitive,
  useExternalStoreRuntime,
  type ThreadMessageLike,
} from "@assistant-ui/react";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useEffect, useMemo, useState, type FC } from "react";
import { UUID_RE, announceThreadsChanged, forkShare, getShare, type SharedPath } from "@/lib/api";
import { toMessageLike } from "@/lib/convert";
import { describeError } from "@/lib/errors";
import { DATA, Reasoning, ToolCall } from "./AgentParts";
import { MarkdownText } from "./MarkdownText";
import { MessageAttachment } from "./Thread";
import { useDocumentTitle } from "./useDocumentTitle";

const readOnly = (): Promise<void> => Promise.reject(new Error("a shared conversation is read-only"));

type Loaded = { kind: "loading" } | { kind: "missing" } | { kind: "error"; message: string } | { kind: "ok"; share: SharedPath };

export const SharedView: FC<{ shareId: string }> = ({ shareId }) => {
  const [state, setState] = useState<Loaded>(() => (UUID_RE.test(shareId) ? { kind: "loading" } : { kind: "missing" }));
  useEffect(() => {
    if (!UUID_RE.test(shareId)) return;
    let live = true;
    getShare(shareId)
      .then((share) => live && setState(share ? { kind: "ok", share } : { kind: "missing" }))
      .catch((err: unknown) => live && setState({ kind: "error", message: describeError(err).message }));
    return () => {
      live = false;
    };
  }, [shareId]);
  const title = state.kind === "ok" ? state.share.title || "Shared conversation" : "Shared conversation";
  useDocumentTitle(state.kind === "missing" ? "Link not available · Threadline" : `${title} · Threadline`);
  switch (state.kind) {
    case "loading":
      return (
        <div className="shared-page" aria-busy="true">
          <p className="muted" role="status">
            Loading the shared conversation…
          </p>
        </div>
      );
    case "missing":
      return (
        <div className="not-found" data-testid="share-missing">
          <h1>This link is not available</h1>
          <p className="muted">It may have been revoked or have expired, or the address is wrong.</p>
          <Link href="/welcome" className="button primary">
            Start a new chat
          </Link>
        </div>
      );
    case "error":
      return (
        <div className="not-found" role="alert">
          <h1>Could not open this link</h1>
          <p className="muted">{state.message}</p>
        </div>
      );
  }
  return <SharedThread shareId={shareId} share={state.share} title={title} />;
};

const SharedThread: FC<{ shareId: string; share: SharedPath; title: string }> = ({ shareId, share, title }) => {
  const router = useRouter();
  const messages = useMemo(() => share.messages.map((m) => toMessageLike(m, {})), [share.messages]);
  // onNew is required by the adapter; with no composer on the page it is
  // never called.
  const runtime = useExternalStoreRuntime<ThreadMessageLike>({ messages, convertMessage: (m) => m, isRunning: false, onNew: readOnly });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const continueHere = async () => {
    setBusy(true);
    setError(null);
    try {
      const threadId = await forkShare(shareId);
      announceThreadsChanged();
      router.push(`/chat/${threadId}`);
    } catch (err) {
      setError(describeError(err).message);
      setBusy(false);
    }
  };
  return (
    <div className="shared-page" data-testid="shared-page">
      <header className="shared-header">
        <h1>{title}</h1>
        <p className="muted small">
          A read-only copy of a conversation, shared {new Date(share.created_at).toLocaleDateString()}.
        </p>
      </header>
      <AssistantRuntimeProvider runtime={runtime}>
        <ThreadPrimitive.Root className="thread shared-thread">
          {/* Focusable, so the keyboard scrolls it: nothing in it takes the focus. */}
          <ThreadPrimitive.Viewport className="thread-viewport" tabIndex={0} role="region" aria-label="Shared messages">
            <ThreadPrimitive.Messages components={{ UserMessage, AssistantMessage, SystemMessage }} />
          </ThreadPrimitive.Viewport>
        </ThreadPrimitive.Root>
      </AssistantRuntimeProvider>
      <footer className="shared-footer">
        {error ? (
          <p className="notice" role="alert">
            {error}
          </p>
        ) : null}
        <button type="button" className="button primary" disabled={busy} onClick={() => void continueHere()}>
          {busy ? "Copying…" : "Continue this conversation"}
        </button>
      </footer>
    </div>
  );
};

const UserMessage: FC = () => (
  <MessagePrimitive.Root className="message user" data-testid="user-message">
    <div className="attachments-row">
      <MessagePrimitive.Attachments components={{ Attachment: MessageAttachment }} />
    </div>
    <div className="bubble user-bubble" data-testid="message-text">
      <MessagePrimitive.Parts />
    </div>
  </MessagePrimitive.Root>
);

// Tools render as their calls and results only: nothing to answer here.
const READ_ONLY_TOOLS = { Fallback: ToolCall };

const AssistantMessage: FC = () => (
  <MessagePrimitive.Root className="message assistant" data-testid="assistant-message">
    <div className="assistant-body" data-testid="message-text">
      <MessagePrimitive.Parts components={{ Text: MarkdownText, Reasoning, tools: READ_ONLY_TOOLS, data: DATA }} />
    </div>
  </MessagePrimitive.Root>
);

const SystemMessage: FC = () => (
  <MessagePrimitive.Root className="message system">
    <MessagePrimitive.Parts />
  </MessagePrimitive.Root>
);
