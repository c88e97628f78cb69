import { test } from "node:test";
import assert from "node:assert/strict";
import { resultHref, segments } from "../lib/search";

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
