"use client";

import {
  ActionBarPrimitive,
  AttachmentPrimitive,
  AuiIf,
  BranchPickerPrimitive,
  ComposerPrimitive,
  ErrorPrimitive,
  MessagePrimitive,
  ThreadPrimitive,
  useAui,
  useAuiEvent,
  useAuiState,
} from "@assistant-ui/react";
import { useContext, useEffect, useRef, useState, type FC, type ReactNode } from "react";
import { getRun, type RunInfo } from "@/lib/api";
import { isImageType, typeRefusal } from "@/lib/attachments";
import { takeOfferedName, type Offered } from "@/lib/limits";
import type { RunError } from "@/lib/reducer";
import { refocusAfterRender } from "@/lib/refocus";
import { DATA, Reasoning, TOOLS } from "./AgentParts";
import { BranchNameControl, pickerName, useBranchLabels } from "./BranchLabel";
import { ThreadIdContext } from "./context";
import { MarkdownText } from "./MarkdownText";
import { modelLabel, useModels } from "./ModelPicker";
import { ShareButton, ShareScope } from "./ShareAction";
import { ForkButton } from "./ForkAction";
import { TraceButton } from "./TraceView";

export type Notice = { code: string; message: string; retry?: boolean } | null;

/** Sends what the composer holds again (the draft a refused send gave back). */
const RetryButton: FC = () => {
  const aui = useAui();
  const canSend = useAuiState((s) => s.composer.canSend && !s.thread.isRunning);
  return (
    <button type="button" className="button primary retry" disabled={!canSend} onClick={() => aui.composer().send()}>
      Retry
    </button>
  );
};

/**
 * Says in words why a file was refused before upload: assistant-ui checks
 * the adapter's accept list itself (a drop, a paste) and only emits an event.
 */
export const AttachRefusals: FC<{ onRefused: (e: RunError) => void }> = ({ onRefused }) => {
  // The runtime's refusal names only the type: the files last dropped,
  // pasted or picked give the name.
  const offered = useRef<Offered[]>([]);
  useEffect(() => {
    const note = (files: FileList | null | undefined) => {
      if (files?.length) offered.current = Array.from(files, (f) => ({ name: f.name, type: f.type }));
    };
    const onDrop = (e: DragEvent) => note(e.dataTransfer?.files);
    const onPaste = (e: ClipboardEvent) => note(e.clipboardData?.files);
    const onChange = (e: Event) => {
      if (e.target instanceof HTMLInputElement && e.target.type === "file") note(e.target.files);
    };
    document.addEventListener("drop", onDrop, true);
    document.addEventListener("paste", onPaste, true);
    document.addEventListener("change", onChange, true);
    return () => {
      document.removeEventListener("drop", onDrop, true);
      document.removeEventListener("paste", onPaste, true);
      document.removeEventListener("change", onChange, true);
    };
  }, []);
  useAuiEvent("composer.attachmentAddError", (e) => {
    if (e.reason === "not-accepted") onRefused(typeRefusal(e.contentType, takeOfferedName(offered.current, e.contentType)));
  });
  return null;
};

/**
 * Files dropped anywhere on the thread go to the composer (assistant-ui's
 * dropzone); while files are dragged over it, the thread says so.
 */
export const DropZone: FC<{ children: ReactNode; className?: string }> = ({ children, className }) => (
  <ComposerPrimitive.AttachmentDropzone className={`dropzone ${className ?? ""}`.trim()} data-testid="dropzone">
    {children}
    <div className="drop-overlay" data-testid="drop-overlay" aria-hidden="true">
      <span>Drop files to attach them</span>
    </div>
  </ComposerPrimitive.AttachmentDropzone>
);

export const Thread: FC<{
  notice?: Notice;
  onDismissNotice?: () => void;
  onRefused?: (e: RunError) => void;
  placeholder?: string;
  empty?: ReactNode;
  toolbar?: ReactNode;
}> = ({ notice, onDismissNotice, onRefused, placeholder, empty, toolbar }) => {
  return (
    <ThreadPrimitive.Root className="thread">
      {onRefused ? <AttachRefusals onRefused={onRefused} /> : null}
      <DropZone className="thread-drop">
        <ThreadPrimitive.Viewport className="thread-viewport">
          <AuiIf condition={(s) => s.thread.isEmpty && !s.thread.isLoading}>
            <div className="thread-empty">{empty ?? <p>Ask anything.</p>}</div>
          </AuiIf>
          <ThreadPrimitive.Messages
            components={{ UserMessage, AssistantMessage, SystemMessage, UserEditComposer: EditComposer }}
          />
          {notice ? (
            <div className="notice" role="alert" data-testid="thread-notice">
              <span>
                {notice.message}
                {notice.code ? <code className="notice-code">{notice.code}</code> : null}
              </span>
              {notice.retry ? <RetryButton /> : null}
              {onDismissNotice ? (
                <button type="button" className="link" onClick={onDismissNotice} aria-label="Dismiss">
                  ×
                </button>
              ) : null}
            </div>
          ) : null}
          <ThreadPrimitive.ViewportFooter className="thread-footer">
            <ThreadPrimitive.ScrollToBottom className="scroll-bottom" aria-label="Scroll to bottom">
              ↓
            </ThreadPrimitive.ScrollToBottom>
            {toolbar ? <div className="composer-toolbar">{toolbar}</div> : null}
            <Composer placeholder={placeholder ?? "Message Threadline…"} />
          </ThreadPrimitive.ViewportFooter>
        </ThreadPrimitive.Viewport>
      </DropZone>
    </ThreadPrimitive.Root>
  );
};

export const Composer: FC<{ placeholder: string; attachments?: boolean }> = ({ placeholder, attachments = true }) => (
  <ComposerPrimitive.Root className="composer">
    {attachments ? (
      <div className="composer-attachments">
        <ComposerPrimitive.Attachments components={{ Attachment: ComposerAttachment }} />
      </div>
    ) : null}
    <div className="composer-row">
      {attachments ? (
        <ComposerPrimitive.AddAttachment className="icon-button" aria-label="Attach a file" title="Attach a file (image, text, Markdown, CSV, JSON, PDF)">
          +
        </ComposerPrimitive.AddAttachment>
      ) : null}
      <ComposerPrimitive.Input
        className="composer-input"
        placeholder={placeholder}
        rows={1}
        autoFocus
        aria-label="Message"
        // Escape must not silently stop a reply: Stop is a button.
        cancelOnEscape={false}
      />
      <AuiIf condition={(s) => !s.thread.isRunning}>
        <ComposerPrimitive.Send className="button primary" aria-label="Send">
          Send
        </ComposerPrimitive.Send>
      </AuiIf>
      <AuiIf condition={(s) => s.thread.isRunning}>
        <ComposerPrimitive.Cancel className="button" aria-label="Stop">
          Stop
        </ComposerPrimitive.Cancel>
      </AuiIf>
    </div>
  </ComposerPrimitive.Root>
);

/** An image's thumbnail (files are uploaded when picked: the stored URL). */
const AttachmentThumb: FC = () => {
  const attachment = useAuiState((s) => s.attachment);
  const part = attachment.content?.find((p) => p.type === "image");
  const src = part && part.type === "image" ? part.image : null;
  if (!src || !isImageType(attachment.contentType ?? "image/")) return <span className="attachment-file" aria-hidden>📎</span>;
  // eslint-disable-next-line @next/next/no-img-element
  return <img className="attachment-image" src={src} alt={attachment.name} />;
};

const ComposerAttachment: FC = () => {
  const contentType = useAuiState((s) => s.attachment.contentType);
  const isImage = useAuiState((s) => s.attachment.type === "image") || isImageType(contentType);
  return isImage ? <ComposerImage /> : <FileChip withRemove />;
};

const ComposerImage: FC = () => (
  <AttachmentPrimitive.Root className="attachment" data-testid="composer-attachment">
    <AttachmentThumb />
    <span className="attachment-name">
      <AttachmentPrimitive.Name />
    </span>
    <AttachmentPrimitive.Remove className="link" aria-label="Remove the image">
      ×
    </AttachmentPrimitive.Remove>
  </AttachmentPrimitive.Root>
);

/** A file that is not an image: a chip with its kind and name, opening the stored file. */
const FileChip: FC<{ withRemove?: boolean }> = ({ withRemove }) => {
  const attachment = useAuiState((s) => s.attachment);
  const part = attachment.content?.find((p) => p.type === "file");
  const url = part && part.type === "file" ? part.data : undefined;
  const kind = fileKind(attachment.name, attachment.contentType);
  const body = (
    <>
      <span className="file-chip-icon" aria-hidden>
        {kind}
      </span>
      <span className="file-chip-text">
        <span className="attachment-name">{attachment.name}</span>
        <span className="file-chip-type">{kind} file</span>
      </span>
    </>
  );
  return (
    <AttachmentPrimitive.Root
      className="attachment file-chip"
      data-testid={withRemove ? "composer-attachment" : "message-attachment"}
      data-kind={kind}
    >
      {url && !withRemove ? (
        <a className="file-chip-link" href={url} target="_blank" rel="noopener noreferrer" title={`Open ${attachment.name}`}>
          {body}
        </a>
      ) : (
        body
      )}
      {withRemove ? (
        <AttachmentPrimitive.Remove className="link" aria-label={`Remove ${attachment.name}`}>
          ×
        </AttachmentPrimitive.Remove>
      ) : null}
    </AttachmentPrimitive.Root>
  );
};

function fileKind(name: string, contentType: string | undefined): string {
  const ext = /\.([a-z0-9]+)$/i.exec(name)?.[1]?.toLowerCase();
  if (ext && ext.length <= 4) return ext === "markdown" ? "md" : ext;
  if (contentType === "application/pdf") return "pdf";
  return "file";
}

export const MessageAttachment: FC = () => {
  const contentType = useAuiState((s) => s.attachment.contentType);
  const isImage = useAuiState((s) => s.attachment.type === "image") || isImageType(contentType);
  if (!isImage) return <FileChip />;
  return (
    <AttachmentPrimitive.Root className="attachment" data-testid="message-attachment">
      <ImageOpener />
    </AttachmentPrimitive.Root>
  );
};

/** A sent image's thumbnail: a button that shows it large in a dialog (Escape closes it, focus comes back). */
const ImageOpener: FC = () => {
  const attachment = useAuiState((s) => s.attachment);
  const part = attachment.content?.find((p) => p.type === "image");
  const src = part && part.type === "image" ? part.image : null;
  const dialog = useRef<HTMLDialogElement>(null);
  const opener = useRef<HTMLButtonElement>(null);
  // The large image is in the page only while the dialog is open.
  const [open, setOpen] = useState(false);
  if (!src) return <AttachmentThumb />;
  const close = () => dialog.current?.close();
  return (
    <>
      <button
        ref={opener}
        type="button"
        className="thumb-button"
        aria-label={`Open the image ${attachment.name}`}
        aria-haspopup="dialog"
        onClick={() => {
          setOpen(true);
          dialog.current?.showModal();
        }}
      >
        <AttachmentThumb />
      </button>
      <dialog
        ref={dialog}
        className="image-dialog"
        aria-label={attachment.name}
        data-testid="image-dialog"
        // The dialog closes on Escape itself; the focus goes back to the thumbnail.
        onClose={() => {
          setOpen(false);
          opener.current?.focus();
        }}
        onClick={(e) => {
          if (e.target === dialog.current) close(); // the backdrop
        }}
      >
        <div className="image-dialog-head">
          <span className="attachment-name">{attachment.name}</span>
          <button type="button" className="button" onClick={close}>
            Close
          </button>
        </div>
        {open ? (
          // eslint-disable-next-line @next/next/no-img-element
          <img className="image-large" src={src} alt={attachment.name} />
        ) : null}
      </dialog>
    </>
  );
};

/**
 * ‹ n / m ›. A switch renders another message in this place; the focus stays
 * on the same button of the picker at the same position (refocusAfterRender).
 */
const BranchPicker: FC = () => {
  const index = useAuiState((s) => s.message.index);
  const messageId = useAuiState((s) => s.message.id);
  const number = useAuiState((s) => s.message.branchNumber);
  const count = useAuiState((s) => s.message.branchCount);
  const threadId = useContext(ThreadIdContext);
  const name = useBranchLabels(threadId)[messageId];
  const title = pickerName(number, count, name);
  const keepFocus = (label: string) =>
    refocusAfterRender(() => {
      const picker = document.querySelector<HTMLElement>(`[data-testid="branch-picker"][data-index="${index}"]`);
      const same = picker?.querySelector<HTMLButtonElement>(`button[aria-label="${label}"]`);
      // At the first or last branch that button is disabled: the other one.
      return same && !same.disabled ? same : picker?.querySelector<HTMLButtonElement>("button:not(:disabled)");
    });
  return (
    <BranchPickerPrimitive.Root
      hideWhenSingleBranch
      className="branch-picker"
      data-testid="branch-picker"
      data-index={index}
      role="group"
      aria-label={title}
      title={title}
    >
      <BranchPickerPrimitive.Previous
        className="icon-button"
        aria-label="Previous branch"
        title="Previous branch ([)"
        onClick={() => keepFocus("Previous branch")}
      >
        ‹
      </BranchPickerPrimitive.Previous>
      <span className="branch-count" data-testid="branch-count">
        <BranchPickerPrimitive.Number /> / <BranchPickerPrimitive.Count />
      </span>
      <BranchPickerPrimitive.Next className="icon-button" aria-label="Next branch" title="Next branch (])" onClick={() => keepFocus("Next branch")}>
        ›
      </BranchPickerPrimitive.Next>
      {name ? (
        <span className="branch-label" data-testid="branch-label">
          {name}
        </span>
      ) : null}
      {threadId ? <BranchNameControl threadId={threadId} messageId={messageId} name={name} index={index} /> : null}
    </BranchPickerPrimitive.Root>
  );
};

const UserMessage: FC = () => {
  const index = useAuiState((s) => s.message.index);
  return (
    <MessagePrimitive.Root className="message user" data-testid="user-message" data-index={index}>
      <div className="attachments-row">
        <MessagePrimitive.Attachments components={{ Attachment: MessageAttachment }} />
      </div>
      <div className="bubble user-bubble" data-testid="message-text">
        <MessagePrimitive.Parts />
      </div>
      <ShareScope>
        <div className="message-footer">
          <BranchPicker />
          <ActionBar>
            <ActionBarPrimitive.Edit className="link" aria-label="Edit">
              Edit
            </ActionBarPrimitive.Edit>
            <ShareButton />
            <ForkButton />
          </ActionBar>
        </div>
      </ShareScope>
    </MessagePrimitive.Root>
  );
};

/** After an edit closes without sending (Escape, Cancel), the focus goes back to its message's Edit button. */
function refocusEdit(index: number): void {
  refocusAfterRender(() =>
    document.querySelector<HTMLButtonElement>(`[data-testid="user-message"][data-index="${index}"] button[aria-label="Edit"]`),
  );
}

const EditComposer: FC = () => {
  const index = useAuiState((s) => s.message.index);
  return (
    <ComposerPrimitive.Root
      className="message user edit-composer"
      data-testid="edit-composer"
      onKeyDownCapture={(e) => {
        if (e.key === "Escape") refocusEdit(index);
      }}
    >
      <div className="composer-attachments">
        <ComposerPrimitive.Attachments components={{ Attachment: ComposerAttachment }} />
      </div>
      <ComposerPrimitive.Input className="composer-input" aria-label="Edit message" autoFocus />
      <div className="edit-actions">
        <ComposerPrimitive.Cancel className="button" aria-label="Cancel edit" onClick={() => refocusEdit(index)}>
          Cancel
        </ComposerPrimitive.Cancel>
        <ComposerPrimitive.Send className="button primary" aria-label="Save and send">
          Save
        </ComposerPrimitive.Send>
      </div>
    </ComposerPrimitive.Root>
  );
};

const StatusLine: FC = () => {
  const status = useAuiState((s) => s.message.status);
  if (!status || status.type !== "incomplete") return null;
  if (status.reason === "cancelled") return <div className="status-line" data-testid="message-cancelled">Stopped.</div>;
  if (status.reason === "error") return null; // MessagePrimitive.Error says it
  if (status.reason === "length") return <div className="status-line">Cut off at the length limit.</div>;
  return <div className="status-line">The reply did not finish.</div>;
};

const AssistantMessage: FC = () => (
  <MessagePrimitive.Root className="message assistant" data-testid="assistant-message">
    <div className="assistant-body" data-testid="message-text">
      <MessagePrimitive.Parts components={{ Text: MarkdownText, Reasoning, tools: TOOLS, data: DATA }} />
    </div>
    <AuiIf condition={(s) => s.message.status?.type === "running" && s.message.content.length === 0}>
      <span className="typing" role="status" aria-label="Thinking" data-testid="typing">
        ●●●
      </span>
    </AuiIf>
    <MessagePrimitive.Error>
      <ErrorPrimitive.Root className="message-error" role="alert" data-testid="message-error">
        <ErrorPrimitive.Message />
      </ErrorPrimitive.Root>
    </MessagePrimitive.Error>
    <StatusLine />
    <ShareScope>
      <div className="message-footer">
        <BranchPicker />
        <ActionBar>
          <ActionBarPrimitive.Copy className="link" aria-label="Copy">
            <AuiIf condition={(s) => s.message.isCopied}>Copied</AuiIf>
            <AuiIf condition={(s) => !s.message.isCopied}>Copy</AuiIf>
          </ActionBarPrimitive.Copy>
          <ActionBarPrimitive.Reload className="link" aria-label="Regenerate">
            Regenerate
          </ActionBarPrimitive.Reload>
          <RegenerateWith />
          <ShareButton />
          <ForkButton />
        </ActionBar>
        <ReplyDetails />
        <TraceButton />
      </div>
    </ShareScope>
  </MessagePrimitive.Root>
);

const SystemMessage: FC = () => (
  <MessagePrimitive.Root className="message system">
    <MessagePrimitive.Parts />
  </MessagePrimitive.Root>
);

/**
 * A message's actions. Never unmounted (autohide="never"): the last
 * message's always show; older ones show on hover and keyboard focus
 * (globals.css, .reveal), and Tab reaches them either way.
 */
const ActionBar: FC<{ children: ReactNode }> = ({ children }) => {
  const isLast = useAuiState((s) => s.message.isLast);
  return (
    <ActionBarPrimitive.Root hideWhenRunning autohide="never" className={isLast ? "action-bar" : "action-bar reveal"}>
      {children}
    </ActionBarPrimitive.Root>
  );
};

/** "Regenerate with…": the reply again, by another model. */
const RegenerateWith: FC = () => {
  const aui = useAui();
  const { models } = useModels();
  const disabled = useAuiState((s) => s.thread.isRunning);
  if (models.length < 2) return null;
  return (
    <select
      className="regen-with"
      aria-label="Regenerate with another model"
      value=""
      disabled={disabled}
      onChange={(e) => {
        const model = e.target.value;
        if (model) aui.message().reload({ runConfig: { custom: { model } } });
      }}
    >
      <option value="">Regenerate with…</option>
      {models.map((m) => (
        <option key={m.name} value={m.name} disabled={m.configured === false}>
          {modelLabel(m)}
        </option>
      ))}
    </select>
  );
};

const runs = new Map<string, Promise<RunInfo | null>>();

/** The run behind a finished reply (model, usage, duration), asked once per run. */
function useRunInfo(threadId: string | null, runId: string | undefined, finished: boolean): RunInfo | null {
  const [info, setInfo] = useState<RunInfo | null>(null);
  useEffect(() => {
    if (!threadId || !runId || !finished) return;
    let live = true;
    let p = runs.get(runId);
    if (!p) {
      p = getRun(threadId, runId).catch(() => {
        runs.delete(runId);
        return null;
      });
      runs.set(runId, p);
    }
    void p.then((r) => {
      if (live) setInfo(r);
    });
    return () => {
      live = false;
    };
  }, [threadId, runId, finished]);
  return info;
}

const timeFormat = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });

/** Under each reply: which model wrote it, when, its usage and how long it took. */
const ReplyDetails: FC = () => {
  const threadId = useContext(ThreadIdContext);
  const runId = useAuiState((s) => {
    const r = s.message.metadata?.custom?.runId;
    return typeof r === "string" ? r : undefined;
  });
  const createdAt = useAuiState((s) => s.message.createdAt);
  const finished = useAuiState((s) => s.message.status?.type !== "running");
  const info = useRunInfo(threadId, runId, finished);
  if (!createdAt && !info) return null;
  const parts: string[] = [];
  if (info?.model) parts.push(info.model);
  if (createdAt) parts.push(timeFormat.format(createdAt));
  if (info?.usage) parts.push(`${info.usage.prompt_tokens} + ${info.usage.completion_tokens} tokens`);
  if (info?.duration_ms != null) parts.push(`${(info.duration_ms / 1000).toFixed(1)} s`);
  const full = createdAt ? createdAt.toLocaleString() : "";
  return (
    <span className="details-line" data-testid="reply-details" title={full}>
      {parts.join(" · ")}
    </span>
  );
};
