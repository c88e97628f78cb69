import { test } from "node:test";
import assert from "node:assert/strict";
import { branchTo, resultHref, segments } from "../lib/search";
import type { WireRepository } from "../lib/types";

test("segments mark the ranges, counted in code points", () => {
  assert.deepEqual(segments("a 🦊 fox and a fox", [[4, 7], [14, 17]]), [
    { text: "a 🦊 ", mark: false },
    { text: "fox", mark: true },
    { text: " and a ", mark: false },
    { text: "fox", mark: true },
  ]);
  assert.deepEqual(segments("plain", []), [{ text: "plain", mark: false }]);
  assert.deepEqual(segments("", []), []);
});

test("segments ignore ranges out of bounds, backwards or overlapping", () => {
  assert.deepEqual(segments("abcdef", [[1, 3], [2, 4], [5, 99], [4, 4], [-1, 2]]), [
    { text: "a", mark: false },
    { text: "bc", mark: true },
    { text: "def", mark: false },
  ]);
});

test("a hit opens its thread on its message", () => {
  assert.equal(resultHref({ thread_id: "t 1", message_id: "m/2" }), "/chat/t%201?m=m%2F2");
});

test("a message's branch runs to the newest leaf below it", () => {
  const item = (id: string, parentId: string | null) => ({ message: { id, role: "user" as const, content: [] }, parentId });
  // a → b → c ; a → b2 → c2 → d2 ; a → b2 → c3 (newest)
  const repo: WireRepository = {
    headId: "c",
    messages: [item("a", null), item("b", "a"), item("c", "b"), item("b2", "a"), item("c2", "b2"), item("d2", "c2"), item("c3", "b2")],
  };
  assert.deepEqual(branchTo(repo, "b2"), { leaf: "c3", depth: 1 });
  assert.deepEqual(branchTo(repo, "c2"), { leaf: "d2", depth: 2 });
  assert.deepEqual(branchTo(repo, "a"), { leaf: "c3", depth: 0 });
  assert.deepEqual(branchTo(repo, "c"), { leaf: "c", depth: 2 });
  assert.equal(branchTo(repo, "zz"), null);
});
