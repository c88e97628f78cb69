"use client";

// Opens a search result: /chat/{thread}?m={message} makes the message the
// head (the branch shown is the path from the root to it), scrolls to it
// and highlights it briefly, then drops ?m= from the address.

import { useSearchParams } from "next/navigation";
import { useEffect, useRef, type FC } from "react";

/** How long the found message stays highlighted. */
const HIGHLIGHT_MS = 2500;

export const SearchFocus: FC<{ loaded: boolean; headId: string | null; setHead: (id: string) => void }> = ({
  loaded,
  headId,
  setHead,
}) => {
  const target = useSearchParams().get("m");
  const done = useRef<string | null>(null);

  // Once the thread is loaded, the message becomes the head.
  useEffect(() => {
    if (loaded && target && done.current !== target && headId !== target) setHead(target);
  }, [loaded, target, headId, setHead]);

  // Once it is the head, it is the last message shown: scroll to it.
  useEffect(() => {
    if (!loaded || !target || headId !== target || done.current === target) return;
    done.current = target;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const frame = requestAnimationFrame(() => {
      const shown = document.querySelectorAll<HTMLElement>(".thread-viewport .message");
      const el = shown[shown.length - 1];
      if (!el) return;
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
  }, [loaded, target, headId]);
  return null;
};
