// Keeps the keyboard focus where the person was when React swaps the
// element they acted on for a new one (a branch switch renders another
// message; an edit's Escape renders the message again): after the render,
// find() names the element to focus, asked on each frame for a short while.

const FRAMES = 30;

/**
 * Watches a few frames: when the focus falls to the page (its element was
 * replaced), find()'s element takes it. A focus that stayed put is left alone.
 */
export function refocusAfterRender(find: () => HTMLElement | null | undefined): void {
  let frames = 0;
  const step = () => {
    const active = document.activeElement;
    const lost = !active || active === document.body || !active.isConnected;
    const el = lost ? find() : null;
    if (el) {
      el.focus();
      return;
    }
    if (++frames < FRAMES) requestAnimationFrame(step);
  };
  step();
}
