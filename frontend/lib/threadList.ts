// The sidebar's thread list as an external store (subscribe/getState, for
// useSyncExternalStore): pages of GET /threads, reloaded when a run starts or
// ends (THREADS_CHANGED) and after a rename or delete. Never polled; while
// the service cannot be reached it says so and asks again with backoff.

import { listThreads } from "./api";
import { describeError } from "./errors";
import { OUTAGE, backoff, isOutage } from "./outage";
import type { ThreadSummary } from "./types";

export type ThreadListState = {
  threads: ThreadSummary[];
  cursor: string | null;
  loading: boolean;
  loaded: boolean;
  error: string | null;
};

const PAGE = 20;

/** An error in words: the outage sentence, or the service's refusal without ids. */
const message = (err: unknown) => (isOutage(err) ? OUTAGE : describeError(err).message);

export class ThreadListStore {
  private state: ThreadListState = { threads: [], cursor: null, loading: false, loaded: false, error: null };
  private readonly listeners = new Set<() => void>();
  private pages = 1;
  private request = 0;
  private retries = 0;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  getState = (): ThreadListState => this.state;

  private set(patch: Partial<ThreadListState>): void {
    this.state = { ...this.state, ...patch };
    for (const l of this.listeners) l();
  }

  /** Reloads as many pages as are shown. */
  refresh = async (): Promise<void> => {
    const req = ++this.request;
    try {
      let all: ThreadSummary[] = [];
      let next: string | null = null;
      for (let i = 0; i < this.pages; i++) {
        const page = await listThreads(PAGE, next);
        all = all.concat(page.threads);
        next = page.next_cursor;
        if (!next) break;
      }
      this.retries = 0;
      if (req === this.request) this.set({ threads: all, cursor: next, error: null, loading: false, loaded: true });
    } catch (err) {
      if (req !== this.request) return;
      this.set({ error: message(err), loading: false, loaded: true });
      if (isOutage(err)) this.retryLater();
    }
  };

  /** Asks again after a wait that grows with each failure; one wait at a time. */
  private retryLater(): void {
    if (this.retryTimer !== null) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.refresh();
    }, backoff(this.retries++));
  }

  /** Stops asking again (the list goes away). */
  dispose = (): void => {
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
  };

  loadMore = async (): Promise<void> => {
    const cursor = this.state.cursor;
    if (!cursor) return;
    const req = ++this.request;
    this.set({ loading: true });
    try {
      const page = await listThreads(PAGE, cursor);
      if (req !== this.request) return;
      this.pages++;
      const ids = new Set(this.state.threads.map((t) => t.thread_id));
      this.set({
        threads: this.state.threads.concat(page.threads.filter((t) => !ids.has(t.thread_id))),
        cursor: page.next_cursor,
        loading: false,
      });
    } catch (err) {
      if (req === this.request) this.set({ error: message(err), loading: false });
    }
  };

  /** Shows a change at once (a rename, a delete) before the reload confirms it. */
  update = (fn: (threads: ThreadSummary[]) => ThreadSummary[]): void => this.set({ threads: fn(this.state.threads) });

  /** Shows what went wrong (in words; an Error is described), or null. */
  setError = (error: unknown): void => this.set({ error: error === null ? null : message(error) });
}
