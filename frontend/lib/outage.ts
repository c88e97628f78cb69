// The service being unreachable (the web app's proxy answers 502, or the
// web app itself is gone) is not a refusal: every view says so in the same
// words and asks again, waiting longer each time, until it answers.

import { ApiError } from "./api";

/** What every view says while the service cannot be reached. */
export const OUTAGE = "Can't reach the Threadline service. Retrying…";

/** The code of an outage notice, so that the view that recovers can drop it. */
export const OUTAGE_CODE = "unreachable";

/** Whether err means the service could not be reached (worth asking again). */
export function isOutage(err: unknown): boolean {
  if (err instanceof ApiError) {
    return err.code === "bad_gateway" || err.code === "unavailable" || [502, 503, 504].includes(err.status);
  }
  // fetch rejects with a TypeError when the network (or the web app) is gone.
  return err instanceof TypeError;
}

/** How long to wait before the attempt-th retry (0 based): doubling, at most 15 s. */
export function backoff(attempt: number): number {
  return Math.min(500 * 2 ** Math.max(0, attempt), 15_000);
}
