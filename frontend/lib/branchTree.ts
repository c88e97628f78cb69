// The thread as a tree of branches, built from the snapshot's
// messageRepository (every message with its parentId): each message a node
// with its children in the order they were written, the shown path marked,
// and the order a tree view lists them in (depth first).

import type { WireRepository, WireMessage } from "./types";

export type BranchNode = {
  id: string;
  role: WireMessage["role"];
  /** The message's first words (or what it holds, when it has no text). */
  label: string;
  depth: number;
  parentId: string | null;
  children: BranchNode[];
  /** On the path the thread shows (root to head). */
  onPath: boolean;
  /** 1-based place among its siblings, and how many there are. */
  index: number;
  siblings: number;
};

/** How many words of a message a node shows. */
const WORDS = 8;

/** A message's first words, or a short word for what it holds. */
export function firstWords(m: WireMessage, words = WORDS): string {
  const text = m.content
    .map((p) => (p.type === "text" || p.type === "reasoning" ? (p as { text?: string }).text ?? "" : ""))
    .join(" ")
    .trim();
  if (!text) {
    const kinds = m.content.map((p) => p.type.replace(/^tool-call$/, "tool call"));
    return kinds.length ? `(${Array.from(new Set(kinds)).join(", ")})` : "(empty)";
  }
  const all = text.split(/\s+/);
  return all.slice(0, words).join(" ") + (all.length > words ? "…" : "");
}

/** The head the repository shows: headId, or its newest leaf. */
function headOf(repo: WireRepository): string | null {
  if (repo.headId) return repo.headId;
  const parents = new Set(repo.messages.map((i) => i.parentId));
  for (let i = repo.messages.length - 1; i >= 0; i--) {
    const id = repo.messages[i]!.message.id;
    if (!parents.has(id)) return id;
  }
  return null;
}

/** The tree's roots; a message whose parent is missing becomes a root. */
export function buildBranchTree(repo: WireRepository): BranchNode[] {
  const byId = new Map<string, BranchNode>();
  for (const { message, parentId } of repo.messages) {
    byId.set(message.id, {
      id: message.id,
      role: message.role,
      label: firstWords(message),
      depth: 0,
      parentId,
      children: [],
      onPath: false,
      index: 1,
      siblings: 1,
    });
  }
  const roots: BranchNode[] = [];
  for (const node of byId.values()) {
    const parent = node.parentId !== null ? byId.get(node.parentId) : undefined;
    (parent ? parent.children : roots).push(node);
  }
  for (let p = headOf(repo); p !== null; ) {
    const node = byId.get(p);
    if (!node || node.onPath) break;
    node.onPath = true;
    p = node.parentId;
  }
  const number = (list: BranchNode[], depth: number) =>
    list.forEach((n, i) => {
      n.depth = depth;
      n.index = i + 1;
      n.siblings = list.length;
      number(n.children, depth + 1);
    });
  number(roots, 0);
  return roots;
}

/** The nodes in the order a tree lists them: depth first, children in order. */
export function flattenTree(roots: readonly BranchNode[]): BranchNode[] {
  const out: BranchNode[] = [];
  const walk = (list: readonly BranchNode[]) =>
    list.forEach((n) => {
      out.push(n);
      walk(n.children);
    });
  walk(roots);
  return out;
}
