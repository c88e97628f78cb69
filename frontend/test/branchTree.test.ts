import { test } from "node:test";
import assert from "node:assert/strict";
import { buildBranchTree, firstWords, flattenTree } from "../lib/branchTree";
import type { WireMessage, WireRepository } from "../lib/types";

const msg = (id: string, role: "user" | "assistant", text: string): WireMessage => ({
  id,
  role,
  content: text ? [{ type: "text", text }] : [],
});

// u1 → a1 → (u2 → a2) | (u3 → (a3 | a4)); head a3.
const repo: WireRepository = {
  headId: "a3",
  messages: [
    { message: msg("u1", "user", "hello there"), parentId: null },
    { message: msg("a1", "assistant", "hi"), parentId: "u1" },
    { message: msg("u2", "user", "first question"), parentId: "a1" },
    { message: msg("a2", "assistant", "first answer"), parentId: "u2" },
    { message: msg("u3", "user", "edited question"), parentId: "a1" },
    { message: msg("a3", "assistant", "one reply"), parentId: "u3" },
    { message: msg("a4", "assistant", "another reply"), parentId: "u3" },
  ],
};

test("the tree keeps every branch, siblings in order, depth first", () => {
  const roots = buildBranchTree(repo);
  assert.equal(roots.length, 1);
  const flat = flattenTree(roots);
  assert.deepEqual(
    flat.map((n) => [n.id, n.depth, n.index, n.siblings]),
    [
      ["u1", 0, 1, 1],
      ["a1", 1, 1, 1],
      ["u2", 2, 1, 2],
      ["a2", 3, 1, 1],
      ["u3", 2, 2, 2],
      ["a3", 3, 1, 2],
      ["a4", 3, 2, 2],
    ],
  );
});

test("the shown path runs from the root to the head", () => {
  const onPath = flattenTree(buildBranchTree(repo)).filter((n) => n.onPath).map((n) => n.id);
  assert.deepEqual(onPath, ["u1", "a1", "u3", "a3"]);
  const noHead = flattenTree(buildBranchTree({ ...repo, headId: null })).filter((n) => n.onPath).map((n) => n.id);
  assert.deepEqual(noHead, ["u1", "a1", "u3", "a4"], "no headId: the newest leaf");
});

test("labels are the first words, or what the message holds", () => {
  assert.equal(firstWords(msg("x", "user", "one two three four five"), 3), "one two three…");
  assert.equal(firstWords(msg("x", "user", "short"), 3), "short");
  assert.equal(firstWords(msg("x", "assistant", "")), "(empty)");
  assert.equal(firstWords({ id: "x", role: "assistant", content: [{ type: "tool-call", toolCallId: "c", toolName: "t", args: {}, argsText: "{}" }] }), "(tool call)");
});

test("an orphan becomes a root, an empty repository an empty tree", () => {
  assert.deepEqual(buildBranchTree({ headId: null, messages: [] }), []);
  const roots = buildBranchTree({ headId: null, messages: [{ message: msg("z", "user", "lost"), parentId: "gone" }] });
  assert.equal(roots.length, 1);
  assert.equal(roots[0]!.id, "z");
});
