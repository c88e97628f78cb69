import { test } from "node:test";
import assert from "node:assert/strict";
import { SHORTCUTS, shortcutOf, type ShortcutId } from "../lib/shortcuts";

const key = (k: string, mods: Partial<{ ctrl: boolean; meta: boolean; shift: boolean; alt: boolean }> = {}) => ({
  key: k,
  ctrlKey: !!mods.ctrl,
  metaKey: !!mods.meta,
  shiftKey: !!mods.shift,
  altKey: !!mods.alt,
});

test("shortcutOf: plain keys only when not typing, chords always", () => {
  const cases: { name: string; e: ReturnType<typeof key>; typing: boolean; want: ShortcutId | null }[] = [
    { name: "? opens the help", e: key("?", { shift: true }), typing: false, want: "help" },
    { name: "? while typing types", e: key("?", { shift: true }), typing: true, want: null },
    { name: "/ focuses the composer", e: key("/"), typing: false, want: "composer" },
    { name: "/ while typing types", e: key("/"), typing: true, want: null },
    { name: "[ previous branch", e: key("["), typing: false, want: "prevBranch" },
    { name: "] next branch", e: key("]"), typing: false, want: "nextBranch" },
    { name: "Ctrl-Shift-O new chat while typing", e: key("O", { ctrl: true, shift: true }), typing: true, want: "newChat" },
    { name: "Cmd-Shift-O new chat", e: key("o", { meta: true, shift: true }), typing: false, want: "newChat" },
    { name: "Ctrl-Shift-S sidebar", e: key("S", { ctrl: true, shift: true }), typing: true, want: "sidebar" },
    { name: "Ctrl-O is the browser's", e: key("o", { ctrl: true }), typing: false, want: null },
    { name: "Alt-[ is not ours", e: key("[", { alt: true }), typing: false, want: null },
    { name: "Ctrl-[ is not ours", e: key("[", { ctrl: true }), typing: false, want: null },
    { name: "a letter is nothing", e: key("a"), typing: false, want: null },
  ];
  for (const c of cases) assert.equal(shortcutOf(c.e, c.typing), c.want, c.name);
});

test("every shortcut is listed once, with words", () => {
  const ids = SHORTCUTS.map((s) => s.id);
  assert.equal(new Set(ids).size, ids.length);
  for (const s of SHORTCUTS) assert.ok(s.what.length > 3 && s.keys.length > 0, s.id);
});
