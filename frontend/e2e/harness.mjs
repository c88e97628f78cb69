// The browser tests' harness on node:test: browserSuite() is a describe()
// whose before() hook starts the stack (stack.mjs) and Chromium, and whose
// after() hook stops them; each test gets a fresh browser context and page.
// A failing test leaves a screenshot in e2e/artifacts/; uncaught errors in
// the page fail the test.
//
//   E2E_REPEAT=n          registers every test n times (flake hunting)
//   E2E_SCREENSHOTS=1     a screenshot of every passing test too
//   CHROMIUM_PATH         default /usr/bin/chromium (Debian's; never downloaded)
// Select tests with node's own --test-name-pattern.

import { after, before, describe, it } from "node:test";
import { basename, join } from "node:path";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { makeCtx } from "./helpers.mjs";
import { artifacts, startStack } from "./stack.mjs";

const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export const DESKTOP = { width: 1200, height: 800 };
export const PHONE = { width: 390, height: 844 };

/**
 * The two sizes issue 30 wants each of its items tested at: a desktop
 * window and a phone (touch, mobile viewport). Pass one's opts to test().
 */
export const VIEWPORTS = [
  { name: "desktop", phone: false, opts: {} },
  { name: "phone", phone: true, opts: { viewport: PHONE, isMobile: true } },
];

/**
 * Registers a test once per viewport: "name (desktop)", "name (phone)";
 * fn also gets phone (true on the phone run).
 */
export function onBothViewports(test, name, fn, opts = {}) {
  for (const v of VIEWPORTS) {
    test(`${name} (${v.name})`, (args) => fn({ ...args, phone: v.phone }), { ...opts, ...v.opts });
  }
}

const slug = (s) => s.replace(/[^a-z0-9]+/gi, "-").replace(/^-|-$/g, "").toLowerCase();

/** A screenshot a reviewer can look at: e2e/artifacts/<name>.png. */
export async function keepScreenshot(page, name, opts = {}) {
  const path = join(artifacts, `${slug(name)}.png`);
  await page.screenshot({ path, ...opts });
  return path;
}

/**
 * A suite of browser tests against one stack. body(test) registers tests:
 * test(name, fn, { viewport, colorScheme, timeout }), fn({ page, context, ctx, t }).
 * opts.serviceEnv: settings of this suite's service (its environment).
 */
export function browserSuite(file, body, opts = {}) {
  const name = basename(file).replace(/\.test\.mjs$/, "");
  describe(name, () => {
    const ctx = {};
    let browser = null;
    before(
      async () => {
        Object.assign(ctx, makeCtx(await startStack(name, { serviceEnv: opts.serviceEnv, web: opts.web })));
        browser = await chromium.launch({
          executablePath: process.env.CHROMIUM_PATH || "/usr/bin/chromium",
          headless: true,
          args: CHROMIUM_FLAGS,
        });
      },
      { timeout: 240_000 },
    );
    after(async () => {
      await browser?.close().catch(() => {});
      await ctx.stop?.();
    });

    const repeat = Math.max(1, Number(process.env.E2E_REPEAT) || 1);
    const test = (testName, fn, opts = {}) => {
      for (let i = 1; i <= repeat; i++) {
        const label = repeat > 1 ? `${testName} (#${i})` : testName;
        it(label, { timeout: opts.timeout ?? 90_000 }, async (t) => {
          const context = await browser.newContext({
            viewport: opts.viewport ?? DESKTOP,
            ...(opts.colorScheme ? { colorScheme: opts.colorScheme } : {}),
            ...(opts.isMobile ? { isMobile: true, hasTouch: true } : {}),
          });
          const page = await context.newPage();
          page.setDefaultTimeout(20_000);
          const pageErrors = [];
          page.on("pageerror", (e) => pageErrors.push(e.message));
          try {
            await fn({ page, context, ctx, t });
            assert.deepEqual(pageErrors, [], "no uncaught errors in the page");
            if (process.env.E2E_SCREENSHOTS) await keepScreenshot(page, `${name}-${label}.ok`).catch(() => {});
          } catch (err) {
            const shot = await keepScreenshot(page, `${name}-${label}.failed`, { fullPage: true }).catch(() => null);
            if (shot) t.diagnostic(`screenshot: ${shot}`);
            throw err;
          } finally {
            await context.close().catch(() => {});
          }
        });
      }
    };
    body(test);
  });
}
