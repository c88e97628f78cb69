"use client";

// Opens a search result: /chat/{thread}?m={message} shows the branch
// through the message (down to the newest leaf below it, as the service
// resolves a head), scrolls to the message and highlights it briefly, then
// drops ?m= from the address.

import { useSearchParams } from "next/navigation";
import { useEffect, useRef, type FC } from "react";
import { branchTo } from "@/lib/search";
import type { WireRepository } from "@/lib/types";

/** How long the found message stays highlighted. */
const HIGHLIGHT_MS = 2500;

export const SearchFocus: FC<{ loaded: boolean; repository: WireRepository; setHead: (id: string) => void }> = ({
  loaded,
  repository,
  setHead,
}) => {
  const target = useSearchParams().get("m");
  const done = useRef<string | null>(null);
  const branch = loaded && target ? branchTo(repository, target) : null;
  const leaf = branch?.leaf ?? null;
  const depth = branch?.depth ?? -1;

  // Once the thread is loaded, the message's branch is shown.
  useEffect(() => {
    if (leaf && done.current !== target && repository.headId !== leaf) setHead(leaf);
  }, [leaf, target, repository.headId, setHead]);

  // Once it is, scroll to the message: the depth-th message of the path.
  useEffect(() => {
    if (!leaf || !target || repository.headId !== leaf || done.current === target) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const frame = requestAnimationFrame(() => {
      const el = document.querySelectorAll<HTMLElement>(".thread-viewport .message")[depth];
      if (!el) return;
      done.current = target;
      el.setAttribute("data-search-hit", target);
      el.scrollIntoView({ block: "center" });
      timer = setTimeout(() => el.removeAttribute("data-search-hit"), HIGHLIGHT_MS);
      const url = new URL(window.location.href);
      url.searchParams.delete("m");
      window.history.replaceState(window.history.state, "", url.pathname + url.search + url.hash);
    });
    return () => {
      cancelAnimationFrame(frame);
      if (timer) clearTimeout(timer);
    };
  }, [leaf, depth, target, repository.headId]);
  return null;
};
