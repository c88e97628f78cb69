"use client";

// The page frame: the sidebar beside the page on wide screens (collapsible,
// remembered per browser); on phones a top bar whose menu button opens the
// sidebar as a drawer (closed by a thread link, the overlay or Escape). The
// first tab stop is a skip link to the conversation; the keyboard shortcuts
// live here (Shortcuts.tsx).

import Link from "next/link";
import { usePathname } from "next/navigation";
import { useCallback, useEffect, useRef, useState, useSyncExternalStore, type FC, type ReactNode } from "react";
import { getSidebarCollapsed, setSidebarCollapsed, subscribeSidebar } from "@/lib/sidebarPref";
import { Shortcuts } from "./Shortcuts";
import { Sidebar } from "./Sidebar";
import "./shell.css";

/** The first tab stop: to the page's content (the conversation), past the thread list. */
const SkipLink: FC = () => (
  <a className="skip-link" href="#conversation">
    Skip to conversation
  </a>
);

export const AppShell: FC<{ children: ReactNode }> = ({ children }) => {
  // A share link's page (/s/…) stands alone: no sidebar, nobody's threads.
  const shared = usePathname()?.startsWith("/s/") ?? false;
  return shared ? <main className="main shared-main">{children}</main> : <Frame>{children}</Frame>;
};

const Frame: FC<{ children: ReactNode }> = ({ children }) => {
  const [open, setOpen] = useState(false);
  const collapsed = useSyncExternalStore(subscribeSidebar, getSidebarCollapsed, () => false);
  const toggleSidebar = useCallback(() => setSidebarCollapsed(!getSidebarCollapsed()), []);
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
    <div className={["app", open ? "drawer-open" : "", collapsed ? "sidebar-collapsed" : ""].join(" ").trim()}>
      <SkipLink />
      <button
        type="button"
        className="icon-button sidebar-toggle"
        data-testid="sidebar-toggle"
        aria-label="Thread list"
        aria-expanded={!collapsed}
        aria-controls="sidebar"
        aria-keyshortcuts="Control+Shift+S Meta+Shift+S"
        title={collapsed ? "Show the thread list (Ctrl/Cmd-Shift-S)" : "Hide the thread list (Ctrl/Cmd-Shift-S)"}
        onClick={toggleSidebar}
      >
        {collapsed ? "»" : "«"}
      </button>
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
      <main className="main" id="conversation" tabIndex={-1}>
        {children}
      </main>
      <Shortcuts toggleSidebar={toggleSidebar} />
    </div>
  );
};
