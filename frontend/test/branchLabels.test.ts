import { test } from "node:test";
import assert from "node:assert/strict";
import { MAX_LABEL, labelProblem, labelsFrom, pickerName, withLabel } from "../lib/branchLabels";

const A = "0b9f6a52-5f0e-4a43-9d0b-6f1f6e0c2a11";
const B = "5d1c2f7e-8a9b-4c3d-a2e1-0f9e8d7c6b5a";

test("names come from metadata.branch_labels, well-formed entries only", () => {
  assert.deepEqual(labelsFrom(null), {});
  assert.deepEqual(labelsFrom({ branch_labels: "x" }), {});
  assert.deepEqual(labelsFrom({ branch_labels: [1] }), {});
  assert.deepEqual(labelsFrom({ branch_labels: { [A]: "shorter answer", [B]: "  " } }), { [A]: "shorter answer" });
  assert.deepEqual(labelsFrom({ branch_labels: { [A]: 3, [B]: "é".repeat(MAX_LABEL + 1) } }), {});
});

test("a name is set trimmed, cleared when blank, and every other key kept", () => {
  const settings = { chat_settings: { temperature: 0.5 } };
  const named = withLabel(settings, A, "  with tests ");
  assert.deepEqual(named, { chat_settings: { temperature: 0.5 }, branch_labels: { [A]: "with tests" } });
  const two = withLabel(named, B, "shorter");
  assert.deepEqual(two.branch_labels, { [A]: "with tests", [B]: "shorter" });
  const renamed = withLabel(two, A, "tests first");
  assert.deepEqual(renamed.branch_labels, { [A]: "tests first", [B]: "shorter" });
  const cleared = withLabel(withLabel(renamed, A, ""), B, "   ");
  assert.deepEqual(cleared, { chat_settings: { temperature: 0.5 } }, "no empty map left behind");
  assert.deepEqual(settings, { chat_settings: { temperature: 0.5 } }, "the given metadata is not changed");
});

test("a name of more than the most characters is refused in words", () => {
  assert.equal(labelProblem("é".repeat(MAX_LABEL)), null);
  assert.equal(labelProblem(""), null, "blank clears");
  assert.match(labelProblem("é".repeat(MAX_LABEL + 1)) ?? "", /at most 80 characters; this one has 81/);
});

test("the picker's name says which branch and its name", () => {
  assert.equal(pickerName(2, 3, undefined), "Branch 2 of 3");
  assert.equal(pickerName(1, 2, "shorter answer"), "Branch 1 of 2: shorter answer");
});
