// The web app's security headers: every page carries its
// Content-Security-Policy, nosniff and no framing, and the browser
// enforces the policy (a script from another origin is refused).

import assert from "node:assert/strict";
import { browserSuite } from "./harness.mjs";

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  test("pages carry the CSP, nosniff and no framing; the browser enforces the CSP", async ({ page, ctx }) => {
    for (const path of ["/", "/chat/00000000-0000-4000-8000-000000000000"]) {
      const res = await fetch(`${ctx.baseUrl}${path}`);
      const csp = res.headers.get("content-security-policy") ?? "";
      for (const directive of ["default-src 'self'", "object-src 'none'", "frame-ancestors 'none'", "base-uri 'self'"]) {
        assert.ok(csp.includes(directive), `${path}: CSP ${JSON.stringify(csp)} lacks ${directive}`);
      }
      assert.equal(res.headers.get("x-content-type-options"), "nosniff", `${path}: nosniff`);
      assert.equal(res.headers.get("x-frame-options"), "DENY", `${path}: X-Frame-Options`);
      await res.arrayBuffer();
    }
    await page.goto(`${ctx.baseUrl}/`);
    const violated = await page.evaluate(
      () =>
        new Promise((resolve) => {
          document.addEventListener("securitypolicyviolation", (e) => resolve(e.violatedDirective), { once: true });
          const s = document.createElement("script");
          s.src = "https://example.invalid/x.js";
          document.head.appendChild(s);
          setTimeout(() => resolve("none"), 10_000);
        }),
    );
    assert.match(violated, /^script-src/, "a script from another origin breaks the policy");
  });
});
