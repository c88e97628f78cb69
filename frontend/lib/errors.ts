// What a failed request means to the person using the app: a sentence in
// plain words, the service's code beside it, and whether a Retry makes sense.
// The service's own message names ids (UUIDs) and request fields; it is
// never shown as it is.

import { ApiError } from "./api";
import type { RunError } from "./reducer";

/** The service's error codes (checkpoint/errcode) as sentences. */
const SENTENCES: Readonly<Record<string, string>> = {
  run_in_progress: "A reply is still being written in this thread (perhaps in another tab).",
  bad_gateway: "The Threadline service is not answering.",
  unavailable: "The Threadline service is unavailable right now.",
  rate_limited: "Too many requests right now.",
  invalid_fork: "That can no longer be answered here: the conversation moved on.",
  not_found: "This conversation or message no longer exists.",
  conflict: "This was already sent.",
  too_large: "That is too large to send.",
  unsupported_media_type: "The service could not read that request.",
  unauthenticated: "You are not signed in to the Threadline service.",
  method_not_allowed: "The service does not allow that.",
  internal: "The service failed.",
};

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

/** A message of the service without the ids it names. */
export function withoutIds(message: string): string {
  return message.replace(UUID, "…").replace(/\s+/g, " ").trim();
}

/** The sentence for a service error code, or null when it has none. */
export function sentenceFor(code: string): string | null {
  return SENTENCES[code] ?? null;
}

function plain(err: unknown): { code: string; message: string } {
  if (err instanceof ApiError) {
    const sentence = sentenceFor(err.code);
    if (sentence) return { code: err.code, message: sentence };
    if (err.code === "invalid_request") {
      return { code: err.code, message: `The service refused the request: ${withoutIds(err.message)}` };
    }
    if (err.status >= 500) return { code: err.code, message: "The service failed." };
    return { code: err.code, message: withoutIds(err.message) };
  }
  // fetch rejects with a TypeError when the network (or the web app) is gone.
  if (err instanceof TypeError) return { code: "network_error", message: "Could not reach Threadline." };
  if (err instanceof Error) return { code: "error", message: withoutIds(err.message) };
  return { code: "error", message: withoutIds(String(err)) };
}

/**
 * Turns an error thrown by lib/api.ts (or fetch) into a notice; with retry,
 * the notice says the draft was kept and offers a Retry.
 */
export function describeError(err: unknown, opts: { retry?: boolean } = {}): RunError {
  const { code, message } = plain(err);
  if (!opts.retry) return { code, message };
  return { code, message: `${message} Your message was not sent; it is back in the box below.`, retry: true };
}
