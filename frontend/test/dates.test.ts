import { test } from "node:test";
import assert from "node:assert/strict";
import { dateGroupLabel, groupByDate } from "../lib/dates";

const now = new Date(2026, 10, 23, 21, 30); // 23 November 2026, 21:30 local

test("labels by day, week, month", () => {
  const cases: [Date, string][] = [
    [new Date(2026, 10, 23, 0, 1), "Today"],
    [new Date(2026, 10, 23, 21, 29), "Today"],
    [new Date(2026, 10, 22, 23, 59), "Yesterday"],
    [new Date(2026, 10, 22, 0, 0), "Yesterday"],
    [new Date(2026, 10, 21, 23, 0), "Previous 7 days"],
    [new Date(2026, 10, 16, 0, 0), "Previous 7 days"],
    [new Date(2026, 10, 15, 23, 0), "Previous 30 days"],
    [new Date(2026, 9, 24, 12, 0), "Previous 30 days"],
    [new Date(2026, 9, 20, 12, 0), "October 2026"],
    [new Date(2025, 0, 5, 12, 0), "January 2025"],
  ];
  for (const [at, want] of cases) assert.equal(dateGroupLabel(at, now), want, `${at.toString()}: got ${dateGroupLabel(at, now)}, want ${want}`);
});

test("groups keep the list's order and merge neighbours", () => {
  const items = [
    { id: "a", at: new Date(2026, 10, 23, 20).toISOString() },
    { id: "b", at: new Date(2026, 10, 23, 9).toISOString() },
    { id: "c", at: new Date(2026, 10, 22, 9).toISOString() },
    { id: "d", at: new Date(2026, 8, 1).toISOString() },
    { id: "e", at: "not a date" },
  ];
  const groups = groupByDate(items, (i) => i.at, now);
  assert.deepEqual(
    groups.map((g) => [g.label, g.items.map((i) => i.id)]),
    [
      ["Today", ["a", "b"]],
      ["Yesterday", ["c"]],
      ["September 2026", ["d"]],
      ["Older", ["e"]],
    ],
  );
});
