"use client";

// The thread's branches as a tree (an ARIA tree in a dialog): every
// message a node (who wrote it and its first words), siblings where the
// conversation forked, the shown path marked. A button in the chat's
// toolbar and Ctrl/Cmd-Shift-B open it; arrow keys move, Enter (or a
// click) shows that branch: the head goes to the newest leaf below the
// node (as a search hit opens), and the page scrolls to the message.

import { usePathname, useRouter } from "next/navigation";
import { useContext, useEffect, useMemo, useRef, useState, useSyncExternalStore, type FC, type KeyboardEvent } from "react";
import { createPortal } from "react-dom";
import { buildBranchTree, flattenTree, type BranchNode } from "@/lib/branchTree";
import { branchTo } from "@/lib/search";
import type { WireRepository } from "@/lib/types";
import { useBranchLabels } from "./BranchLabel";
import { ThreadIdContext } from "./context";
import "./branches.css";

const noSubscribe = () => () => {};

const who = (n: BranchNode) => (n.role === "user" ? "You" : n.role === "assistant" ? "Assistant" : "System");

export const BranchTreeButton: FC<{ repository: WireRepository; setHead: (id: string) => void }> = ({ repository, setHead }) => {
  const labels = useBranchLabels(useContext(ThreadIdContext));
  const dialog = useRef<HTMLDialogElement>(null);
  const tree = useRef<HTMLUListElement>(null);
  const mounted = useSyncExternalStore(noSubscribe, () => true, () => false);
  const router = useRouter();
  const pathname = usePathname();
  const roots = useMemo(() => buildBranchTree(repository), [repository]);
  const flat = useMemo(() => flattenTree(roots), [roots]);
  const headId = useMemo(() => flat.filter((n) => n.onPath).at(-1)?.id ?? null, [flat]);
  const [collapsed, setCollapsed] = useState<ReadonlySet<string>>(new Set());
  const [focusId, setFocusId] = useState<string | null>(null);
  const forks = flat.filter((n) => n.siblings > 1 && n.index === 1).length;

  // Visible nodes: those under no collapsed node.
  const visible = useMemo(() => {
    const out: BranchNode[] = [];
    const walk = (list: BranchNode[]) =>
      list.forEach((n) => {
        out.push(n);
        if (!collapsed.has(n.id)) walk(n.children);
      });
    walk(roots);
    return out;
  }, [roots, collapsed]);
  const current = visible.find((n) => n.id === focusId) ?? visible.find((n) => n.id === headId) ?? visible[0];

  const focusNode = (id: string | undefined) => {
    if (!id) return;
    setFocusId(id);
    const find = () => tree.current?.querySelector<HTMLElement>(`[data-node-id="${CSS.escape(id)}"]`);
    // A node already shown takes the focus now; one about to be (expanded) next frame.
    const el = find();
    if (el) el.focus();
    else requestAnimationFrame(() => find()?.focus());
  };

  const open = () => {
    const d = dialog.current;
    if (!d) return;
    if (!d.open) d.showModal();
    focusNode(headId ?? flat[0]?.id);
  };
  const close = () => dialog.current?.close();

  const go = (n: BranchNode) => {
    const branch = branchTo(repository, n.id);
    if (branch && branch.leaf !== repository.headId) setHead(branch.leaf);
    close();
    // SearchFocus scrolls to the message and highlights it.
    router.replace(`${pathname}?m=${encodeURIComponent(n.id)}`, { scroll: false });
  };

  useEffect(() => {
    const onKey = (e: globalThis.KeyboardEvent) => {
      if ((e.ctrlKey || e.metaKey) && e.shiftKey && !e.altKey && e.key.toLowerCase() === "b") {
        e.preventDefault();
        open();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  });

  const toggle = (n: BranchNode, expand: boolean) =>
    setCollapsed((c) => {
      const next = new Set(c);
      if (expand) next.delete(n.id);
      else next.add(n.id);
      return next;
    });

  const onKeyDown = (e: KeyboardEvent) => {
    if (!current) return;
    const at = visible.indexOf(current);
    const expanded = current.children.length > 0 && !collapsed.has(current.id);
    const keys: Record<string, () => void> = {
      ArrowDown: () => focusNode(visible[Math.min(at + 1, visible.length - 1)]?.id),
      ArrowUp: () => focusNode(visible[Math.max(at - 1, 0)]?.id),
      Home: () => focusNode(visible[0]?.id),
      End: () => focusNode(visible.at(-1)?.id),
      ArrowRight: () => (expanded ? focusNode(current.children[0]?.id) : current.children.length ? toggle(current, true) : undefined),
      ArrowLeft: () => (expanded ? toggle(current, false) : focusNode(current.parentId ?? undefined)),
      Enter: () => go(current),
      " ": () => go(current),
    };
    const act = keys[e.key];
    if (!act) return;
    e.preventDefault();
    e.stopPropagation();
    act();
  };

  // A flat ARIA tree (aria-level, aria-setsize, aria-posinset): each
  // item's name is its own visible text, not its children's.
  const renderNode = (n: BranchNode) => {
    const hasChildren = n.children.length > 0;
    const isOpen = hasChildren && !collapsed.has(n.id);
    const head = n.id === headId;
    const cls = ["branch-node", n.onPath ? "on-path" : "", head ? "is-head" : ""].join(" ").trim();
    return (
      <li
        key={n.id}
        role="treeitem"
        className={cls}
        style={{ paddingLeft: `${n.depth * 18}px` }}
        data-testid="branch-node"
        data-node-id={n.id}
        data-on-path={n.onPath ? "true" : "false"}
        aria-selected={head}
        aria-expanded={hasChildren ? isOpen : undefined}
        aria-level={n.depth + 1}
        aria-setsize={n.siblings}
        aria-posinset={n.index}
        tabIndex={current?.id === n.id ? 0 : -1}
        onFocus={() => setFocusId(n.id)}
        onClick={() => go(n)}
      >
        <div className="branch-row">
          <span
            className="branch-twisty"
            aria-hidden
            onClick={(e) => {
              if (!hasChildren) return;
              e.stopPropagation();
              toggle(n, !isOpen);
            }}
          >
            {hasChildren ? (isOpen ? "▾" : "▸") : ""}
          </span>
          <span className="branch-text">
            <span className={`branch-role ${n.role}`}>{who(n)}:</span> {n.label}
          </span>
          {labels[n.id] ? (
            <span className="branch-name" data-testid="branch-name">
              {" "}
              · named “{labels[n.id]}”
            </span>
          ) : null}
          {n.siblings > 1 ? (
            <span className="branch-tag">
              {" "}
              · branch {n.index} of {n.siblings}
            </span>
          ) : null}
          {head ? <span className="branch-tag"> · shown</span> : n.onPath ? <span className="branch-tag"> · on the shown path</span> : null}
        </div>
      </li>
    );
  };

  return (
    <>
      <button
        type="button"
        className="button"
        data-testid="branches-open"
        onClick={open}
        aria-keyshortcuts="Control+Shift+B Meta+Shift+B"
        title="Every branch of this chat (Ctrl/Cmd-Shift-B)"
        disabled={flat.length === 0}
      >
        Branches
      </button>
      {mounted
        ? createPortal(
            <dialog
              ref={dialog}
              className="branch-dialog"
              aria-labelledby="branch-dialog-title"
              data-testid="branch-dialog"
              onClick={(e) => {
                if (e.target === dialog.current) close();
              }}
            >
              <div className="branch-head">
                <h2 id="branch-dialog-title">Branches</h2>
                <button type="button" className="button" onClick={close}>
                  Close
                </button>
              </div>
              <p className="muted small" id="branch-dialog-help">
                {flat.length} messages, {forks} {forks === 1 ? "fork" : "forks"}. Arrow keys move, Enter shows a branch;
                the shown path is marked.
              </p>
              <ul
                ref={tree}
                role="tree"
                aria-labelledby="branch-dialog-title"
                aria-describedby="branch-dialog-help"
                className="branch-tree"
                data-testid="branch-tree"
                onKeyDown={onKeyDown}
              >
                {visible.map(renderNode)}
              </ul>
            </dialog>,
            document.body,
          )
        : null}
    </>
  );
};
