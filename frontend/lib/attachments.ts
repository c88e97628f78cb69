// The composer's attachments: each file is uploaded as soon as it is picked
// (POST /attachments), so a refused file (too large, a type the service does
// not take) is reported at once and never reaches the composer; sending then
// only names the stored ids. Images show as thumbnails, other files (text,
// Markdown, CSV, JSON, PDF) as file chips. A file over the service's upload
// limit (GET /limits, read once) is refused before it is sent.

import type { AttachmentAdapter, CompleteAttachment, PendingAttachment, ThreadUserMessagePart } from "@assistant-ui/react";
import { getLimits, uploadAttachment, type HandoffAttachment } from "./api";
import { describeError } from "./errors";
import { attachRefusal, type Limits } from "./limits";
export { typeRefusal } from "./limits";
import type { RunError } from "./reducer";

/** What the service takes by default (api.DefaultAttachmentTypes). */
export const ACCEPT = [
  "image/png",
  "image/jpeg",
  "image/gif",
  "image/webp",
  "text/plain",
  "text/markdown",
  "text/csv",
  "application/json",
  "application/pdf",
  ".txt",
  ".md",
  ".markdown",
  ".csv",
  ".json",
  ".pdf",
].join(",");

export function isImageType(contentType: string | undefined): boolean {
  return !!contentType && contentType.startsWith("image/");
}

/** The parts an attachment stands for in a message: an image, or a file. */
export function attachmentParts(a: { url: string; name: string; contentType: string }): ThreadUserMessagePart[] {
  if (isImageType(a.contentType)) return [{ type: "image", image: a.url }];
  return [{ type: "file", data: a.url, mimeType: a.contentType, filename: a.name }];
}

let limitsOnce: Promise<Limits | null> | null = null;

/** The service's limits, asked once a page; null (and asked again next time) when it could not say. */
function serviceLimits(): Promise<Limits | null> {
  limitsOnce ??= getLimits().catch(() => {
    limitsOnce = null;
    return null;
  });
  return limitsOnce;
}

export class UploadAttachmentAdapter implements AttachmentAdapter {
  accept = ACCEPT;

  constructor(private readonly onError: (error: RunError) => void) {}

  async add({ file }: { file: File }): Promise<PendingAttachment> {
    const refused = attachRefusal(file, await serviceLimits());
    if (refused) {
      this.onError(refused);
      throw new Error(refused.message);
    }
    let uploaded;
    try {
      uploaded = await uploadAttachment(file);
    } catch (err) {
      const e = describeError(err);
      // Reported here; assistant-ui's AddAttachment button swallows the rejection.
      this.onError({ code: e.code, message: `Could not attach ${file.name}: ${e.message}` });
      throw err;
    }
    return {
      id: uploaded.id,
      type: isImageType(uploaded.contentType) ? "image" : "document",
      name: uploaded.name,
      contentType: uploaded.contentType,
      file,
      content: attachmentParts(uploaded),
      status: { type: "requires-action", reason: "composer-send" },
    };
  }

  /** Already uploaded in add(): nothing can fail here. */
  send(attachment: PendingAttachment): Promise<CompleteAttachment> {
    return Promise.resolve({
      id: attachment.id,
      type: attachment.type,
      name: attachment.name,
      ...(attachment.contentType ? { contentType: attachment.contentType } : {}),
      status: { type: "complete" },
      content: attachment.content ?? [],
    });
  }

  remove(): Promise<void> {
    return Promise.resolve();
  }
}

/** A sent message's attachments as the welcome page hands them to the chat page. */
export function toHandoffAttachments(list: readonly CompleteAttachment[] | undefined): HandoffAttachment[] {
  return (list ?? []).map((a) => ({
    id: a.id,
    type: a.type,
    name: a.name,
    ...(a.contentType ? { contentType: a.contentType } : {}),
    content: [...(a.content ?? [])],
  }));
}

/** The handed-over attachments as the runtime's complete attachments. */
export function fromHandoffAttachments(list: readonly HandoffAttachment[] | undefined): CompleteAttachment[] {
  return (list ?? []).map((a) => ({ ...a, content: a.content as ThreadUserMessagePart[], status: { type: "complete" } }));
}
