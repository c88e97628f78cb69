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
  useAuiState,
} from "@assistant-ui/react";
import type { FC, ReactNode } from "react";
import { isImageType } from "@/lib/attachments";
import { MarkdownText } from "./MarkdownText";

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

export const Thread: FC<{
  notice?: Notice;
  onDismissNotice?: () => void;
  placeholder?: string;
  empty?: ReactNode;
  toolbar?: ReactNode;
}> = ({ notice, onDismissNotice, placeholder, empty, toolbar }) => {
  return (
    <ThreadPrimitive.Root className="thread">
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

const ComposerAttachment: FC = () => (
  <AttachmentPrimitive.Root className="attachment" data-testid="composer-attachment">
    <AttachmentThumb />
    <span className="attachment-name">
      <AttachmentPrimitive.Name />
    </span>
    <AttachmentPrimitive.Remove className="link" aria-label="Remove attachment">
      ×
    </AttachmentPrimitive.Remove>
  </AttachmentPrimitive.Root>
);

const MessageAttachment: FC = () => (
  <AttachmentPrimitive.Root className="attachment" data-testid="message-attachment">
    <AttachmentThumb />
  </AttachmentPrimitive.Root>
);

const BranchPicker: FC = () => (
  <BranchPickerPrimitive.Root hideWhenSingleBranch className="branch-picker" data-testid="branch-picker">
    <BranchPickerPrimitive.Previous className="icon-button" aria-label="Previous branch" title="Previous">
      ‹
    </BranchPickerPrimitive.Previous>
    <span className="branch-count" data-testid="branch-count">
      <BranchPickerPrimitive.Number /> / <BranchPickerPrimitive.Count />
    </span>
    <BranchPickerPrimitive.Next className="icon-button" aria-label="Next branch" title="Next">
      ›
    </BranchPickerPrimitive.Next>
  </BranchPickerPrimitive.Root>
);

const UserMessage: FC = () => (
  <MessagePrimitive.Root className="message user" data-testid="user-message">
    <div className="attachments-row">
      <MessagePrimitive.Attachments components={{ Attachment: MessageAttachment }} />
    </div>
    <div className="bubble user-bubble" data-testid="message-text">
      <MessagePrimitive.Parts />
    </div>
    <div className="message-footer">
      <BranchPicker />
      <ActionBarPrimitive.Root hideWhenRunning autohide="not-last" className="action-bar">
        <ActionBarPrimitive.Edit className="link" aria-label="Edit">
          Edit
        </ActionBarPrimitive.Edit>
      </ActionBarPrimitive.Root>
    </div>
  </MessagePrimitive.Root>
);

const EditComposer: FC = () => (
  <ComposerPrimitive.Root className="message user edit-composer" data-testid="edit-composer">
    <div className="composer-attachments">
      <ComposerPrimitive.Attachments components={{ Attachment: ComposerAttachment }} />
    </div>
    <ComposerPrimitive.Input className="composer-input" aria-label="Edit message" autoFocus />
    <div className="edit-actions">
      <ComposerPrimitive.Cancel className="button" aria-label="Cancel edit">
        Cancel
      </ComposerPrimitive.Cancel>
      <ComposerPrimitive.Send className="button primary" aria-label="Save and send">
        Save
      </ComposerPrimitive.Send>
    </div>
  </ComposerPrimitive.Root>
);

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
      <MessagePrimitive.Parts components={{ Text: MarkdownText }} />
    </div>
    <AuiIf condition={(s) => s.message.status?.type === "running" && s.message.content.length === 0}>
      <span className="typing" aria-label="Thinking" data-testid="typing">
        ●●●
      </span>
    </AuiIf>
    <MessagePrimitive.Error>
      <ErrorPrimitive.Root className="message-error" role="alert" data-testid="message-error">
        <ErrorPrimitive.Message />
      </ErrorPrimitive.Root>
    </MessagePrimitive.Error>
    <StatusLine />
    <div className="message-footer">
      <BranchPicker />
      <ActionBarPrimitive.Root hideWhenRunning autohide="not-last" className="action-bar">
        <ActionBarPrimitive.Copy className="link" aria-label="Copy">
          <AuiIf condition={(s) => s.message.isCopied}>Copied</AuiIf>
          <AuiIf condition={(s) => !s.message.isCopied}>Copy</AuiIf>
        </ActionBarPrimitive.Copy>
        <ActionBarPrimitive.Reload className="link" aria-label="Regenerate">
          Regenerate
        </ActionBarPrimitive.Reload>
      </ActionBarPrimitive.Root>
    </div>
  </MessagePrimitive.Root>
);

const SystemMessage: FC = () => (
  <MessagePrimitive.Root className="message system">
    <MessagePrimitive.Parts />
  </MessagePrimitive.Root>
);
