// The service down outside the send path (the relay of stack.mjs refuses
// the web app's connections to it): the sidebar, a thread reloaded during
// the outage and the model picker say in words what is wrong, never the
// proxy's raw error, and recover by themselves once the service is back.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { browserSuite, keepScreenshot, onBothViewports } from "./harness.mjs";
import { assistantMessages, norm, poll, seriousViolations } from "./helpers.mjs";

const OUTAGE = "Can't reach the Threadline service. Retrying…";

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  onBothViewports(test, "a reload while the service is down says so everywhere, then recovers by itself", async ({ page, ctx, t, phone }) => {
    if (!ctx.refuseService) return t.skip("needs the harness's relay");
    const threadId = randomUUID();
    await ctx.runDirect(threadId, { message: { content: "Still here after the outage?" }, parent_message_id: null });
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await assistantMessages(page).first().waitFor();
    await page.getByLabel("Model", { exact: true }).waitFor();

    ctx.refuseService(true);
    try {
      await page.reload();
      const notice = page.getByTestId("thread-notice");
      await poll(async () => norm(await notice.innerText()).includes(OUTAGE), { message: "the thread says the service is unreachable" });
      // On a phone the thread list is the drawer: opened to read it.
      if (phone) {
        await page.getByRole("button", { name: "Open the thread list" }).click();
        await page.getByRole("navigation", { name: "Threads" }).waitFor({ state: "visible" });
      }
      const sidebarError = page.locator(".sidebar-error");
      await poll(async () => norm(await sidebarError.innerText()) === OUTAGE, { message: "the sidebar says so in words" });
      await poll(async () => norm(await page.getByTestId("models-unavailable").innerText()).includes(OUTAGE), {
        message: "the model picker says so instead of vanishing",
      });
      assert.equal(await page.getByText("Ask anything.").count(), 0, "not shown as an empty chat");
      const body = norm(await page.locator("body").innerText());
      assert.doesNotMatch(body, /ECONNREFUSED|127\.0\.0\.1|bad_gateway/, `no raw error on the page: ${body}`);
      await keepScreenshot(page, phone ? "outage-phone" : "outage");
      assert.deepEqual(await seriousViolations(page), [], "axe-core, the page during an outage");
    } finally {
      ctx.refuseService(false);
    }

    // Back: everything comes back without a reload.
    await assistantMessages(page).first().waitFor({ timeout: 30_000 });
    await poll(async () => (await page.getByTestId("thread-notice").count()) === 0, { message: "the outage notice goes" });
    await poll(async () => (await page.locator(".sidebar-error").count()) === 0, { message: "the sidebar error goes" });
    await page.locator(`[data-testid=thread-item][data-thread-id="${threadId}"]`).waitFor({ timeout: 30_000 });
    await page.getByLabel("Model", { exact: true }).waitFor({ timeout: 30_000 });
    await poll(async () => (await page.title()) === "Still here after the outage? · Threadline", { message: "the tab title back" });
  });
});
