import { test } from "node:test";
import assert from "node:assert/strict";
import { runConfigOf, settingsFrom } from "../lib/chatSettings";

test("settings come from metadata.chat_settings, well-formed fields only", () => {
  assert.deepEqual(settingsFrom(null), {});
  assert.deepEqual(settingsFrom({ other: 1 }), {});
  assert.deepEqual(settingsFrom({ chat_settings: { system: "Be brief.", temperature: 0.4, model: "m", max_steps: 3 } }), {
    system: "Be brief.",
    temperature: 0.4,
    model: "m",
    max_steps: 3,
  });
  assert.deepEqual(
    settingsFrom({ chat_settings: { system: "  ", temperature: 7, model: 3, max_steps: 2.5 } }),
    {},
    "blank, out of range or mistyped fields are dropped",
  );
  assert.deepEqual(settingsFrom({ chat_settings: { max_steps: 101 } }), {});
});

test("run_config carries only the fields that are set", () => {
  assert.deepEqual(runConfigOf({}), {});
  assert.deepEqual(runConfigOf({ system: "s", temperature: 0 }), { system: "s", temperature: 0 });
  assert.deepEqual(runConfigOf({ model: "m", max_steps: 1 }), { max_steps: 1, model: "m" });
});
