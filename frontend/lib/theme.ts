// Light, dark or the system's choice, kept per browser. The choice is the
// data-theme attribute of <html> (globals.css); the layout's inline script
// sets it before the first paint, so a reload does not flash.

export type Theme = "system" | "light" | "dark";

const KEY = "threadline:theme";
const listeners = new Set<() => void>();

/** The inline script of the layout's <head> (runs before React). */
export const THEME_SCRIPT = `try{var t=localStorage.getItem(${JSON.stringify(KEY)});if(t==="light"||t==="dark")document.documentElement.dataset.theme=t}catch(e){}`;

export function getTheme(): Theme {
  try {
    const t = window.localStorage.getItem(KEY);
    return t === "light" || t === "dark" ? t : "system";
  } catch {
    return "system";
  }
}

export function setTheme(theme: Theme): void {
  try {
    if (theme === "system") window.localStorage.removeItem(KEY);
    else window.localStorage.setItem(KEY, theme);
  } catch {
    /* storage off: this page only */
  }
  if (theme === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
  for (const l of listeners) l();
}

export function subscribeTheme(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** The theme that follows a click on the toggle. */
export function nextTheme(t: Theme): Theme {
  return t === "system" ? "dark" : t === "dark" ? "light" : "system";
}
