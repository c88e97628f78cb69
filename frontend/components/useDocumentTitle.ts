"use client";

import { useEffect } from "react";

/**
 * Keeps the browser tab's title at `title` while the component is mounted.
 * Next writes the route's metadata title itself, and with streamed metadata it
 * can do so after this component's effect has run; the observer puts ours back.
 */
export function useDocumentTitle(title: string): void {
  useEffect(() => {
    const apply = () => {
      if (document.title !== title) document.title = title;
    };
    apply();
    const observer = new MutationObserver(apply);
    observer.observe(document.documentElement, { childList: true, subtree: true, characterData: true });
    return () => observer.disconnect();
  }, [title]);
}
