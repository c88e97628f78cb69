// Titles: a first reply stopped by the person still names its thread (in
// the sidebar and the tab, without a reload); the tab follows a rename; the
// open thread's title in the sidebar ends before its buttons. Also where a
// reply's details line sits: on its own row right under the reply.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { browserSuite, onBothViewports } from "./harness.mjs";
import { assistantMessages, norm, openNewChat, poll, send, seriousViolations, stopButton, waitIdle } from "./helpers.mjs";

const toolCall = (page, tool) => assistantMessages(page).last().locator(`[data-testid=tool-call][data-tool=${tool}]`);

/** On a phone the thread list is the drawer: opened to read it. */
async function openThreadList(page, phone) {
  if (!phone) return;
  await page.getByRole("button", { name: "Open the thread list" }).click();
  await page.getByRole("navigation", { name: "Threads" }).waitFor({ state: "visible" });
}

const overlap = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  onBothViewports(test, "a first reply stopped by the person still names the thread, in the sidebar and the tab", async ({ page, ctx, phone }) => {
    const threadId = await openNewChat(page, ctx);
    await page.evaluate(() => window.localStorage.setItem("threadline:model", "builtin:demo"));
    await send(page, "please wait 20 seconds");
    await toolCall(page, "wait").waitFor();
    await stopButton(page).click();
    await waitIdle(page);
    const snap = await ctx.snapshot(threadId);
    assert.equal(snap.messages.at(-1).status.reason, "cancelled", "the reply was stopped");
    await openThreadList(page, phone);
    const item = page.locator(`[data-testid=thread-item][data-thread-id="${threadId}"]`);
    await poll(async () => norm(await item.innerText()).includes("please wait 20 seconds"), { message: "the title in the sidebar" });
    await poll(async () => (await page.title()) === "please wait 20 seconds · Threadline", { message: "the tab title, no reload" });
  });

  onBothViewports(test, "the tab follows a rename; the open thread's long title ends before its buttons", async ({ page, ctx, phone }) => {
    const threadId = randomUUID();
    await ctx.runDirect(threadId, { message: { content: "Rename me" }, parent_message_id: null });
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await poll(async () => (await page.title()) === "Rename me · Threadline", { message: "the first tab title" });
    await openThreadList(page, phone);
    const item = page.locator(`[data-testid=thread-item][data-thread-id="${threadId}"]`);
    await item.hover();
    await item.getByRole("button", { name: "Rename" }).click();
    const long = "A much longer title about repainting the kitchen and the hall";
    await item.getByLabel("Thread title").fill(long);
    await item.getByLabel("Thread title").press("Enter");
    await poll(async () => (await page.title()) === `${long} · Threadline`, { message: "the tab follows the rename" });
    // Away from the pointer: the open thread's buttons still show, beside its title.
    if (!phone) await page.mouse.move(900, 700);
    const title = await item.locator(".thread-title").boundingBox();
    for (const name of ["Rename", "Delete"]) {
      const button = await item.getByRole("button", { name }).boundingBox();
      assert.ok(title && button, "both laid out");
      assert.ok(!overlap(title, button), `the title ${JSON.stringify(title)} runs under ${name} ${JSON.stringify(button)}`);
      assert.ok(button.width >= 24 && button.height >= 24, `${name} is at least 24 px: ${JSON.stringify(button)}`);
    }
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a renamed open thread");
  });

  onBothViewports(test, "a reply's model, time and tokens line sits right under the reply, on its own row", async ({ page, ctx }) => {
    const threadId = randomUUID();
    await ctx.runDirect(threadId, { message: { content: "hello there" }, parent_message_id: null });
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    const reply = assistantMessages(page).last();
    const details = reply.getByTestId("reply-details");
    await poll(async () => /tokens/.test(await details.innerText()), { message: "the details line" });
    const body = await reply.getByTestId("message-text").boundingBox();
    const line = await details.boundingBox();
    const copy = await reply.getByRole("button", { name: "Copy" }).boundingBox();
    assert.ok(line.y >= body.y + body.height - 1, `under the reply: ${JSON.stringify({ body, line })}`);
    assert.ok(Math.abs(line.x - body.x) <= 2, `aligned with the reply: ${JSON.stringify({ body, line })}`);
    assert.ok(copy.y >= line.y + line.height - 1, `the actions below it, not beside it: ${JSON.stringify({ line, copy })}`);
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a reply with its details");
  });
});
