// Whether the desktop sidebar is collapsed, kept per browser (localStorage)
// and read through useSyncExternalStore (false on the server).

const KEY = "threadline:sidebar";
const listeners = new Set<() => void>();

export function getSidebarCollapsed(): boolean {
  try {
    return window.localStorage.getItem(KEY) === "collapsed";
  } catch {
    return false;
  }
}

export function setSidebarCollapsed(collapsed: boolean): void {
  try {
    if (collapsed) window.localStorage.setItem(KEY, "collapsed");
    else window.localStorage.removeItem(KEY);
  } catch {
    /* storage off: this page only */
  }
  for (const l of listeners) l();
}

export function subscribeSidebar(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
