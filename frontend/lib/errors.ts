// What a failed request means to the person using the app: a sentence in
// plain words, the service's code beside it, and whether a Retry makes sense.

import { ApiError } from "./api";
import type { RunError } from "./reducer";

function plain(err: unknown): { code: string; message: string } {
  if (err instanceof ApiError) {
    switch (err.code) {
      case "run_in_progress":
        return { code: err.code, message: "A reply is still being written in this thread (perhaps in another tab)." };
      case "bad_gateway":
        return { code: err.code, message: "The Threadline service is not answering." };
      case "rate_limited":
        return { code: err.code, message: "Too many requests right now." };
    }
    if (err.status >= 500) return { code: err.code, message: `The service failed: ${err.message}` };
    return { code: err.code, message: err.message };
  }
  // fetch rejects with a TypeError when the network (or the web app) is gone.
  if (err instanceof TypeError) return { code: "network_error", message: "Could not reach Threadline." };
  if (err instanceof Error) return { code: "error", message: err.message };
  return { code: "error", message: String(err) };
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
