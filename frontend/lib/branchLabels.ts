// Optional names people give branches ("shorter answer", "with tests"),
// kept in the thread's metadata under "branch_labels" (PATCH /threads/{id}):
// a map from the id of a branch's first message, which never changes, to
// its name. The service checks them (docs/api.md). A page keeps one copy per
// thread, loaded once and shared by the branch tree and the pickers.

import { getThread, patchThreadMetadata } from "./api";

export type BranchLabels = Readonly<Record<string, string>>;

export const LABELS_KEY = "branch_labels";

/** The most characters a name may have (the service says the same). */
export const MAX_LABEL = 80;

/** The well-formed names in a thread's metadata. */
export function labelsFrom(metadata: Record<string, unknown> | null | undefined): BranchLabels {
  const raw = metadata?.[LABELS_KEY];
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return {};
  const out: Record<string, string> = {};
  for (const [id, v] of Object.entries(raw as Record<string, unknown>)) {
    if (typeof v === "string" && v.trim() && [...v].length <= MAX_LABEL) out[id] = v;
  }
  return out;
}

/** "Branch 2 of 3: shorter answer": the picker's accessible name and tooltip. */
export function pickerName(number: number, count: number, name: string | undefined): string {
  return `Branch ${number} of ${count}${name ? `: ${name}` : ""}`;
}

/** Why a name cannot be saved, or null. A blank name clears it. */
export function labelProblem(name: string): string | null {
  const n = [...name.trim()].length;
  return n > MAX_LABEL ? `A branch name has at most ${MAX_LABEL} characters; this one has ${n}.` : null;
}

/**
 * The metadata with the branch's name set (trimmed), or cleared when blank;
 * every other key kept. An empty map goes away.
 */
export function withLabel(metadata: Record<string, unknown> | null | undefined, id: string, name: string): Record<string, unknown> {
  const labels: Record<string, string> = { ...labelsFrom(metadata) };
  const trimmed = name.trim();
  if (trimmed) labels[id] = trimmed;
  else delete labels[id];
  const out: Record<string, unknown> = { ...(metadata ?? {}) };
  if (Object.keys(labels).length) out[LABELS_KEY] = labels;
  else delete out[LABELS_KEY];
  return out;
}

// The page's copy, per thread, and who shows it.
const labelsOf = new Map<string, BranchLabels>();
const loading = new Set<string>();
const listeners = new Set<() => void>();
const EMPTY: BranchLabels = {};

function publish(threadId: string, labels: BranchLabels): void {
  labelsOf.set(threadId, labels);
  for (const l of listeners) l();
}

export function subscribeLabels(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** The names known for the thread (none until loaded). */
export function currentLabels(threadId: string): BranchLabels {
  return labelsOf.get(threadId) ?? EMPTY;
}

/** Loads the thread's names once per page (again after a failure). */
export function loadLabels(threadId: string): void {
  if (labelsOf.has(threadId) || loading.has(threadId)) return;
  loading.add(threadId);
  void getThread(threadId)
    .then((t) => {
      if (t) publish(threadId, labelsFrom(t.metadata));
    })
    .catch(() => {
      /* no names shown; the next view asks again */
    })
    .finally(() => loading.delete(threadId));
}

/**
 * Names the branch starting at message id (a blank name clears it). The
 * thread is read first, so that names given elsewhere and the other keys
 * (chat settings) are kept. Throws the service's error (lib/errors says it
 * in words); the shown names change only once it is saved.
 */
export async function saveLabel(threadId: string, id: string, name: string): Promise<void> {
  const thread = await getThread(threadId);
  if (!thread) throw new Error("This conversation no longer exists.");
  const metadata = withLabel(thread.metadata, id, name);
  const saved = await patchThreadMetadata(threadId, metadata);
  publish(threadId, labelsFrom(saved.metadata));
}
