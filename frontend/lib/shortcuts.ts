// The app's keyboard shortcuts: one table, read by the key handler
// (components/Shortcuts.tsx) and by the help dialog that lists them.

export type ShortcutId = "help" | "newChat" | "search" | "composer" | "prevBranch" | "nextBranch" | "branchTree" | "sidebar";

export type Shortcut = {
  id: ShortcutId;
  /** The keys as shown, "Mod" being Ctrl (Cmd on a Mac). */
  keys: string[];
  what: string;
  /** Also while typing in a field (a modifier chord); plain keys are not. */
  whileTyping: boolean;
};

export const SHORTCUTS: readonly Shortcut[] = [
  { id: "help", keys: ["?"], what: "Show these shortcuts", whileTyping: false },
  { id: "newChat", keys: ["Mod", "Shift", "O"], what: "New chat", whileTyping: true },
  { id: "search", keys: ["Mod", "K"], what: "Search conversations", whileTyping: true },
  { id: "composer", keys: ["/"], what: "Focus the message box", whileTyping: false },
  { id: "prevBranch", keys: ["["], what: "Previous branch of the focused (or last) message", whileTyping: false },
  { id: "nextBranch", keys: ["]"], what: "Next branch of the focused (or last) message", whileTyping: false },
  { id: "branchTree", keys: ["Mod", "Shift", "B"], what: "Show the branch tree", whileTyping: true },
  { id: "sidebar", keys: ["Mod", "Shift", "S"], what: "Collapse or expand the thread list", whileTyping: true },
];

type KeyLike = { key: string; ctrlKey: boolean; metaKey: boolean; shiftKey: boolean; altKey: boolean };

/**
 * The shortcut a key press stands for, or null. typing: the focus is in a
 * text field, where plain keys type. Search (Mod-K) and the branch tree
 * (Mod-Shift-B) have handlers of their own and are only listed here.
 */
export function shortcutOf(e: KeyLike, typing: boolean): ShortcutId | null {
  const mod = e.ctrlKey || e.metaKey;
  if (e.altKey) return null;
  const k = e.key.toLowerCase();
  if (mod && e.shiftKey && k === "o") return "newChat";
  if (mod && e.shiftKey && k === "s") return "sidebar";
  if (mod || typing) return null;
  if (e.key === "?") return "help";
  if (e.key === "/") return "composer";
  if (e.key === "[") return "prevBranch";
  if (e.key === "]") return "nextBranch";
  return null;
}

/** Whether el is a place where keys type text. */
export function isTyping(el: Element | null): boolean {
  if (!el) return false;
  if (el instanceof HTMLElement && el.isContentEditable) return true;
  const tag = el.tagName;
  if (tag === "TEXTAREA" || tag === "SELECT") return true;
  if (tag !== "INPUT") return false;
  const type = (el as HTMLInputElement).type;
  return !["button", "checkbox", "radio", "submit", "reset", "range", "color", "file"].includes(type);
}
