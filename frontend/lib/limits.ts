// The service's request limits (GET /api/v1/limits), checked in the browser
// before anything is sent: a file over the upload limit is refused at once,
// without uploading it only to be told no (and a browser still sending a
// large body may see the connection closed instead of the service's 413).

import type { RunError } from "./reducer";

/** What GET /api/v1/limits answers (api.Limits). */
export interface Limits {
  max_body_bytes: number;
  max_message_bytes: number;
  max_attachment_bytes: number;
  max_attachments: number;
  attachment_types: string[];
}

/** A size in the units people read: bytes, KiB or MiB. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${trim(n / 1024)} KiB`;
  return `${trim(n / (1024 * 1024))} MiB`;
}

function trim(x: number): string {
  return x.toFixed(1).replace(/\.0$/, "");
}

/**
 * Why file cannot be attached under limits, or null when it can (or when
 * the limits are unknown: the service then decides).
 */
export function attachRefusal(file: { name: string; size: number }, limits: Limits | null): RunError | null {
  if (!limits || !(limits.max_attachment_bytes > 0) || file.size <= limits.max_attachment_bytes) return null;
  let size = formatBytes(file.size);
  let limit = formatBytes(limits.max_attachment_bytes);
  if (size === limit) {
    // Just over: rounded, the two would read the same.
    size = `${file.size.toLocaleString("en-US")} bytes`;
    limit = `${limits.max_attachment_bytes.toLocaleString("en-US")} bytes`;
  }
  return { code: "too_large", message: `Could not attach ${file.name}: it is ${size}, over the ${limit} limit.` };
}

/** The kinds of file the service takes, in words (api.DefaultAttachmentTypes). */
export const ACCEPTED_IN_WORDS = "images (PNG, JPEG, GIF, WebP) and text, Markdown, CSV, JSON or PDF files";

/**
 * Why a file of contentType was refused before it was uploaded (assistant-ui
 * checks the adapter's accept list and names no file): a sentence, not the
 * runtime's list of MIME types.
 */
export function typeRefusal(contentType: string | undefined, name?: string): RunError {
  const what = name ? `Could not attach ${name}` : "Could not attach that file";
  const kind = contentType ? ` (${contentType})` : "";
  return {
    code: "unsupported_type",
    message: `${what}: files of this kind${kind} cannot be attached. You can attach ${ACCEPTED_IN_WORDS}.`,
  };
}

/** A file offered to a composer (dropped, pasted or picked): its name and type. */
export type Offered = { name: string; type: string };

/**
 * The name of the offered file a refusal of contentType is about, taken off
 * the list (the runtime's refusal names only the type); undefined when none
 * matches.
 */
export function takeOfferedName(offered: Offered[], contentType: string | undefined): string | undefined {
  const i = offered.findIndex((f) => (f.type || "") === (contentType || ""));
  return i < 0 ? undefined : offered.splice(i, 1)[0]?.name;
}
