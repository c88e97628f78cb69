// Share links: share a message on a branch, open the link with no cookies
// or keys, see only the path to it, continue it as a new thread, revoke it.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { browserSuite } from "./harness.mjs";
import { assistantMessages, norm, poll, seriousViolations, textOf, threadIdFromUrl } from "./helpers.mjs";

/** One run through the service; the stored user message and reply ids. */
async function turn(ctx, threadId, text, parent) {
  const events = await ctx.runDirect(threadId, { message: { content: text }, parent_message_id: parent });
  const last = events.at(-1);
  assert.equal(last.type, "snapshot");
  const [user, reply] = last.messages.slice(-2);
  return { user: user.id, reply: reply.id };
}

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  test("share a message on a branch, open it elsewhere, continue it, revoke it", async ({ page, context, ctx }) => {
    //   root-question -> r1 -> branch-a-question -> ra
    //                       \-> branch-b-question -> rb -> later-question -> rl
    // The chat shows branch b (the newest); rb is shared.
    const threadId = randomUUID();
    const root = await turn(ctx, threadId, "root-question", null);
    await turn(ctx, threadId, "branch-a-question", root.reply);
    const b = await turn(ctx, threadId, "branch-b-question", root.reply);
    await turn(ctx, threadId, "later-question", b.reply);

    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    const replies = assistantMessages(page);
    await poll(async () => (await replies.count()) === 3, { message: "three replies on branch b" });
    const shared = replies.nth(1);
    await shared.hover();
    await shared.getByRole("button", { name: "Share", exact: true }).click();
    const urlField = shared.getByTestId("share-url");
    await urlField.waitFor();
    const url = await urlField.inputValue();
    const m = /\/s\/([0-9a-f-]{36})$/.exec(url);
    assert.ok(m && url.startsWith(ctx.baseUrl), `a share page URL, got ${url}`);
    const shareId = m[1];
    const stored = await ctx.service(`/shares/${shareId}`);
    assert.equal(stored.status, 200);
    assert.deepEqual(stored.body.messages.map((x) => x.id).slice(-1), [b.reply], "the shared message ends the path");

    // A fresh browser context: no cookies, no storage, nothing of the owner's.
    const fresh = await context.browser().newContext({ viewport: { width: 1200, height: 800 } });
    try {
      const viewer = await fresh.newPage();
      const errors = [];
      viewer.on("pageerror", (e) => errors.push(e.message));
      await viewer.goto(url);
      await viewer.getByTestId("shared-page").waitFor();
      await poll(async () => (await viewer.getByTestId("assistant-message").count()) === 2, { message: "the path's two replies" });
      const text = norm(await viewer.getByTestId("shared-page").innerText());
      for (const want of ["root-question", "branch-b-question"]) assert.ok(text.includes(want), `shows ${want}: ${text}`);
      for (const absent of ["branch-a-question", "later-question"]) assert.ok(!text.includes(absent), `hides ${absent}: ${text}`);
      assert.equal(await viewer.locator("#sidebar").count(), 0, "no sidebar");
      assert.equal(await viewer.getByTestId("branch-picker").count(), 0, "no branch picker");
      assert.equal(await viewer.getByLabel("Message", { exact: true }).count(), 0, "no composer");
      assert.deepEqual(await seriousViolations(viewer), [], "axe-core, the shared page");

      await viewer.getByRole("button", { name: "Continue this conversation" }).click();
      await viewer.waitForURL(/\/chat\/[0-9a-f-]{36}$/);
      const forkId = threadIdFromUrl(viewer);
      assert.notEqual(forkId, threadId);
      const fork = await ctx.snapshot(forkId);
      assert.deepEqual(fork.messages.map(textOf).filter((_, i) => i % 2 === 0), ["root-question", "branch-b-question"]);
      assert.equal(fork.messages.length, 4);
      assert.ok(!fork.messages.some((x) => x.id === b.reply), "new message ids");
      await poll(async () => (await viewer.getByTestId("assistant-message").count()) === 2, { message: "the fork opened" });

      // Revoke in the owner's page: the link stops opening.
      await shared.hover();
      await shared.getByRole("button", { name: "Revoke link" }).click();
      await shared.getByTestId("share-revoked").waitFor();
      await viewer.goto(url);
      await viewer.getByTestId("share-missing").waitFor();
      assert.match(norm(await viewer.getByTestId("share-missing").innerText()), /not available/);
      assert.equal((await ctx.service(`/shares/${shareId}`)).status, 404);
      // The fork outlives the share.
      assert.equal((await ctx.service(`/threads/${forkId}/messages`)).status, 200);
      assert.deepEqual(errors, [], "no uncaught errors in the viewer's page");
    } finally {
      await fresh.close().catch(() => {});
    }
  });

  test("an unknown share link says it is not available", async ({ page, ctx }) => {
    await page.goto(`${ctx.baseUrl}/s/${randomUUID()}`);
    await page.getByTestId("share-missing").waitFor();
    assert.equal(await page.locator("#sidebar").count(), 0, "no sidebar");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the missing link");
  });
});
