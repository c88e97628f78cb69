"use client";

// The page frame: the sidebar beside the page on wide screens; on phones a
// top bar whose menu button opens the sidebar as a drawer (closed by a
// thread link, the overlay or Escape).

import Link from "next/link";
import { usePathname } from "next/navigation";
import { useEffect, useRef, useState, type FC, type ReactNode } from "react";
import { Sidebar } from "./Sidebar";

export const AppShell: FC<{ children: ReactNode }> = ({ children }) => {
  // A share link's page (/s/…) stands alone: no sidebar, nobody's threads.
  const shared = usePathname()?.startsWith("/s/") ?? false;
  return shared ? <main className="main shared-main">{children}</main> : <Frame>{children}</Frame>;
};

const Frame: FC<{ children: ReactNode }> = ({ children }) => {
  const [open, setOpen] = useState(false);
  const menuButton = useRef<HTMLButtonElement>(null);
  const close = (refocus: boolean) => {
    setOpen(false);
    if (refocus) menuButton.current?.focus();
  };
  // Escape closes the open drawer, wherever the focus is.
  useEffect(() => {
    if (!open) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== "Escape" || e.defaultPrevented) return;
      setOpen(false);
      menuButton.current?.focus();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [open]);
  return (
    <div className={open ? "app drawer-open" : "app"}>
      <header className="topbar">
        <button
          ref={menuButton}
          type="button"
          className="icon-button"
          aria-label="Open the thread list"
          aria-expanded={open}
          aria-controls="sidebar"
          onClick={() => setOpen(true)}
        >
          ☰
        </button>
        <span className="topbar-title">Threadline</span>
        <Link href="/welcome" className="icon-button" aria-label="New chat" title="New chat">
          +
        </Link>
      </header>
      <button type="button" className="drawer-overlay" aria-label="Close the thread list" tabIndex={-1} onClick={() => close(true)} />
      <Sidebar drawerOpen={open} onClose={close} />
      <main className="main">{children}</main>
    </div>
  );
};
