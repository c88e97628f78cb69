"use client";

// "Share" on a message: a read-only link to that message's branch (the path
// from the root to it), shown with Copy and Revoke. The button sits in the
// message's action bar; the link shows under the message, outside the bar,
// so it stays visible when the bar hides.

import { useAuiState } from "@assistant-ui/react";
import { createContext, useContext, useState, type FC, type ReactNode } from "react";
import { createShare, revokeShare, sharePageUrl, type ShareInfo } from "@/lib/api";
import { describeError } from "@/lib/errors";
import { ThreadIdContext } from "./context";

type ShareState =
  | { kind: "idle" }
  | { kind: "busy" }
  | { kind: "shared"; share: ShareInfo; copied: boolean }
  | { kind: "revoked" }
  | { kind: "error"; message: string };

type ShareCtl = { state: ShareState; set: (s: ShareState) => void };

const ShareContext = createContext<ShareCtl | null>(null);

/** Holds one message's share state; its link panel renders after children. */
export const ShareScope: FC<{ children: ReactNode }> = ({ children }) => {
  const [state, set] = useState<ShareState>({ kind: "idle" });
  return (
    <ShareContext.Provider value={{ state, set }}>
      {children}
      <SharePanel />
    </ShareContext.Provider>
  );
};

/** The action bar's Share button: only for stored messages of a thread. */
export const ShareButton: FC = () => {
  const ctl = useContext(ShareContext);
  const threadId = useContext(ThreadIdContext);
  const messageId = useAuiState((s) => s.message.id);
  const stored = useAuiState((s) => typeof s.message.metadata?.custom?.checkpointId === "string");
  if (!ctl || !threadId || !stored) return null;
  const share = async () => {
    ctl.set({ kind: "busy" });
    try {
      ctl.set({ kind: "shared", share: await createShare(threadId, messageId), copied: false });
    } catch (err) {
      ctl.set({ kind: "error", message: describeError(err).message });
    }
  };
  return (
    <button
      type="button"
      className="link"
      aria-label="Share"
      title="Share a read-only link to the conversation up to this message"
      disabled={ctl.state.kind === "busy"}
      onClick={() => void share()}
    >
      Share
    </button>
  );
};

async function copyText(text: string, input: HTMLInputElement | null): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No clipboard API (an insecure origin): copy the selected field.
    input?.select();
    document.execCommand("copy");
  }
}

const SharePanel: FC = () => {
  const ctl = useContext(ShareContext);
  const [input, setInput] = useState<HTMLInputElement | null>(null);
  if (!ctl) return null;
  const { state, set } = ctl;
  switch (state.kind) {
    case "idle":
    case "busy":
      return null;
    case "error":
      return (
        <div className="share-panel" role="alert" data-testid="share-error">
          Could not share: {state.message}
          <button type="button" className="link" aria-label="Dismiss" onClick={() => set({ kind: "idle" })}>
            ×
          </button>
        </div>
      );
    case "revoked":
      return (
        <div className="share-panel" role="status" data-testid="share-revoked">
          Link revoked: it no longer opens.
          <button type="button" className="link" aria-label="Dismiss" onClick={() => set({ kind: "idle" })}>
            ×
          </button>
        </div>
      );
  }
  const url = sharePageUrl(state.share.share_id);
  const revoke = async () => {
    try {
      await revokeShare(state.share.share_id);
      set({ kind: "revoked" });
    } catch (err) {
      set({ kind: "error", message: describeError(err).message });
    }
  };
  return (
    <div className="share-panel" role="group" aria-label="Share link" data-testid="share-panel">
      <input
        ref={setInput}
        className="share-url"
        readOnly
        value={url}
        aria-label="Share link"
        data-testid="share-url"
        onFocus={(e) => e.currentTarget.select()}
      />
      <button
        type="button"
        className="button"
        aria-label="Copy link"
        onClick={() => void copyText(url, input).then(() => set({ ...state, copied: true }))}
      >
        {state.copied ? "Copied" : "Copy"}
      </button>
      <button type="button" className="button" aria-label="Revoke link" onClick={() => void revoke()}>
        Revoke
      </button>
      <button type="button" className="link" aria-label="Close" onClick={() => set({ kind: "idle" })}>
        ×
      </button>
    </div>
  );
};
