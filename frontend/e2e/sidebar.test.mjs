// The sidebar: rename, delete with undo, paging.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { browserSuite, onBothViewports } from "./harness.mjs";
import {
  norm,
  openNewChat,
  poll,
  send,
  seriousViolations,
  waitIdle,
} from "./helpers.mjs";

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  test("rename and delete a thread", async ({ page, ctx }) => {
    const threadId = randomUUID();
    await ctx.runDirect(threadId, { message: { content: "Rename me" }, parent_message_id: null });
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    const item = page.locator(`[data-testid=thread-item][data-thread-id="${threadId}"]`);
    await item.waitFor();
    await item.hover();
    await item.getByRole("button", { name: "Rename" }).click();
    const input = item.getByLabel("Thread title");
    await input.fill("Renamed thread");
    await input.press("Enter");
    await poll(async () => norm(await item.innerText()).includes("Renamed thread"), { message: "new title shown" });
    await poll(async () => (await ctx.service(`/threads/${threadId}`)).body?.title === "Renamed thread", {
      message: "title stored",
    });
    await page.reload();
    await poll(async () => norm(await item.innerText()).includes("Renamed thread"), { message: "title after reload" });

    // Delete asks no question: the thread goes at once, with an Undo for a few seconds.
    page.once("dialog", (d) => assert.fail(`no browser dialog, got ${d.type()}: ${d.message()}`));
    await item.hover();
    await item.getByRole("button", { name: "Delete" }).click();
    await page.waitForURL("**/welcome");
    await item.waitFor({ state: "detached" });
    const toast = page.getByTestId("undo-toast");
    assert.match(norm(await toast.innerText()), /Deleted “Renamed thread”\. Undo/);
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the undo toast");
    assert.equal((await ctx.service(`/threads/${threadId}`)).status, 200, "not deleted while Undo is offered");
    await poll(async () => (await ctx.service(`/threads/${threadId}`)).status === 404, { message: "deleted after the toast", timeout: 15_000 });
    await toast.waitFor({ state: "detached" });
  });

  onBothViewports(test, "Undo brings a deleted thread back, and the service never deletes it", async ({ page, ctx, phone }) => {
    const threadId = randomUUID();
    await ctx.runDirect(threadId, { message: { content: "Keep me after all" }, parent_message_id: null });
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    if (phone) {
      // On a phone the thread list is the drawer.
      await page.getByRole("button", { name: "Open the thread list" }).click();
      await page.getByRole("navigation", { name: "Threads" }).waitFor({ state: "visible" });
    }
    const item = page.locator(`[data-testid=thread-item][data-thread-id="${threadId}"]`);
    await item.hover();
    await item.getByRole("button", { name: "Delete" }).click();
    await item.waitFor({ state: "detached" });
    await page.getByTestId("undo-toast").getByRole("button", { name: "Undo" }).click();
    await item.waitFor();
    assert.equal(await page.getByTestId("undo-toast").count(), 0, "the toast goes with the Undo");
    // Past the time Undo was offered: still there.
    await new Promise((r) => setTimeout(r, 6000));
    assert.equal((await ctx.service(`/threads/${threadId}`)).status, 200);
  });

  test("a thread whose first reply failed is titled by its question", async ({ page, ctx }) => {
    const threadId = await openNewChat(page, ctx);
    // The built-in model fails a message that starts with /fail.
    await send(page, "/fail model_error");
    await waitIdle(page);
    await poll(async () => (await ctx.service(`/threads/${threadId}`)).body?.title === "/fail model_error", {
      message: "the title stored after the failed run",
    });
    await page.reload();
    const item = page.locator(`[data-testid=thread-item][data-thread-id="${threadId}"]`);
    await poll(async () => norm(await item.innerText()).includes("/fail model_error"), { message: "the title in the sidebar" });
    await poll(async () => (await page.title()) === "/fail model_error · Threadline", { message: "the tab title" });
  });

  test("the sidebar pages through threads, most recent first", async ({ page, ctx }) => {
    const ids = [];
    for (let i = 0; i < 22; i++) {
      const id = randomUUID();
      const r = await ctx.service("/threads", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ thread_id: id }),
      });
      assert.ok(r.status === 201 || r.status === 200, `create thread: ${r.status}`);
      ids.push(id);
    }
    const newest = ids.at(-1);
    await ctx.service(`/threads/${newest}`, {
      method: "PATCH",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ title: "Newest of the page test" }),
    });
    await page.goto(`${ctx.baseUrl}/welcome`);
    const items = page.getByTestId("thread-item");
    await poll(async () => (await items.count()) === 20, { message: "a first page of 20" });
    assert.equal(await items.first().getAttribute("data-thread-id"), newest);
    assert.equal(norm(await items.first().innerText()).startsWith("Newest of the page test"), true);
    await page.getByRole("button", { name: "Load more" }).click();
    await poll(async () => (await items.count()) > 20, { message: "the next page" });
    const shown = await items.evaluateAll((els) => els.map((e) => e.getAttribute("data-thread-id")));
    for (const id of ids) assert.ok(shown.includes(id), `thread ${id} listed`);
    assert.equal(new Set(shown).size, shown.length, "no thread twice");
  });
});
