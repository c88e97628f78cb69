// GET /api/v1/search and the helpers of its answer: a snippet is plain
// text, its highlights [start, end) ranges in Unicode code points.

import type { WireRepository } from "./types";

export type SearchResult = {
  thread_id: string;
  thread_title: string | null;
  message_id: string;
  role: "user" | "assistant" | "system";
  created_at: string;
  snippet: string;
  highlights: [number, number][];
  score: number;
};

export type SearchPage = { results: SearchResult[]; next_cursor: string | null };

export type Segment = { text: string; mark: boolean };

/** Cuts a snippet into plain and marked segments; bad ranges are ignored. */
export function segments(snippet: string, highlights: readonly (readonly [number, number])[]): Segment[] {
  const chars = Array.from(snippet);
  const out: Segment[] = [];
  let at = 0;
  for (const [start, end] of highlights) {
    if (!(start >= at && end > start && end <= chars.length)) continue;
    if (start > at) out.push({ text: chars.slice(at, start).join(""), mark: false });
    out.push({ text: chars.slice(start, end).join(""), mark: true });
    at = end;
  }
  if (at < chars.length) out.push({ text: chars.slice(at).join(""), mark: false });
  return out;
}

/** The page of a hit: the thread opened on the hit's branch. */
export function resultHref(r: Pick<SearchResult, "thread_id" | "message_id">): string {
  return `/chat/${encodeURIComponent(r.thread_id)}?m=${encodeURIComponent(r.message_id)}`;
}

/**
 * The branch that shows message id: the newest leaf below it (the head the
 * service resolves a message to), and the message's place on that path
 * (0 for a root). Null when the message is not in the repository.
 */
export function branchTo(repo: WireRepository, id: string): { leaf: string; depth: number } | null {
  const parent = new Map<string, string | null>();
  for (const item of repo.messages) parent.set(item.message.id, item.parentId);
  if (!parent.has(id)) return null;
  let depth = 0;
  for (let p = parent.get(id) ?? null; p !== null; p = parent.get(p) ?? null) depth++;
  // Messages come oldest first: the last one below id is the newest leaf.
  const below = (m: string): boolean => {
    for (let p: string | null = m; p !== null; p = parent.get(p) ?? null) if (p === id) return true;
    return false;
  };
  const hasChild = new Set<string>();
  for (const item of repo.messages) if (item.parentId !== null) hasChild.add(item.parentId);
  let leaf = id;
  for (let i = repo.messages.length - 1; i >= 0; i--) {
    const m = repo.messages[i]!.message.id;
    if (!hasChild.has(m) && below(m)) {
      leaf = m;
      break;
    }
  }
  return { leaf, depth };
}
