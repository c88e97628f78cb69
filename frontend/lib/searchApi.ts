// The browser's call of GET /api/v1/search, through the web origin's proxy.

import { API_BASE, errorFrom } from "./api";
import type { SearchPage } from "./search";

export async function searchMessages(q: string, cursor: string | null, signal: AbortSignal): Promise<SearchPage> {
  const params = new URLSearchParams({ q, limit: "20" });
  if (cursor) params.set("cursor", cursor);
  const res = await fetch(`${API_BASE}/search?${params}`, { cache: "no-store", signal });
  if (!res.ok) throw await errorFrom(res);
  return (await res.json()) as SearchPage;
}
