// GET /api/v1/search and the helpers of its answer: a snippet is plain
// text, its highlights [start, end) ranges in Unicode code points.

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
