// Attachments in the composer.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { browserSuite } from "./harness.mjs";
import {
  poll,
  textOf,
  redPng,
  userMessages,
  send,
  waitIdle,
  openNewChat,
} from "./helpers.mjs";

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  test("attach an image", async ({ page, ctx }) => {
    const threadId = await openNewChat(page, ctx);
    const chooser = page.waitForEvent("filechooser");
    await page.getByRole("button", { name: "Attach a file" }).click();
    await (await chooser).setFiles({ name: "red.png", mimeType: "image/png", buffer: redPng() });
    await page.getByTestId("composer-attachment").waitFor();
    await send(page, "What is in this picture?");
    const img = userMessages(page).first().getByTestId("message-attachment").locator("img");
    await img.waitFor();
    await poll(async () => (await img.getAttribute("src"))?.startsWith("/api/v1/attachments/"), {
      message: "the stored image's URL",
    });
    await poll(async () => img.evaluate((el) => el.complete && el.naturalWidth === 8), {
      message: "the image loaded through the proxy",
    });
    await waitIdle(page);
    const snap = await ctx.snapshot(threadId);
    const user = snap.messages[0];
    assert.equal(user.attachments.length, 1);
    assert.equal(user.attachments[0].contentType, "image/png");
    assert.equal(textOf(user), "What is in this picture?");
    await page.reload();
    const imgAfter = userMessages(page).first().getByTestId("message-attachment").locator("img");
    await poll(async () => imgAfter.evaluate((el) => el.complete && el.naturalWidth === 8), {
      message: "the image after reload",
    });
  });

  test("an image over the size limit is refused with a message", async ({ page, ctx }) => {
    const threadId = await openNewChat(page, ctx);
    const uploads = [];
    page.on("request", (req) => {
      if (req.method() === "POST" && new URL(req.url()).pathname.endsWith("/attachments")) uploads.push(req.url());
    });
    const chooser = page.waitForEvent("filechooser");
    await page.getByRole("button", { name: "Attach a file" }).click();
    // Over the service's default 10 MiB attachment limit (GET /limits): the
    // app refuses it without uploading it, and nothing is sent.
    // A file on disk: Chromium reads it itself (a buffer this size crawls
    // through the protocol), lazily, so it stays until the test is over.
    const dir = mkdtempSync(join(tmpdir(), "threadline-e2e-big-"));
    try {
      const big = join(dir, "big.png");
      writeFileSync(big, Buffer.concat([redPng(), Buffer.alloc(11 * 1024 * 1024)]));
      await (await chooser).setFiles(big);
      const notice = page.getByTestId("thread-notice");
      await notice.waitFor({ timeout: 20_000 });
      const text = await notice.innerText();
      assert.ok(text.includes("big.png") && text.includes("too_large") && text.includes("over the 10 MiB limit"), text);
      assert.deepEqual(uploads, [], "the file was not uploaded");
      assert.equal(await page.getByTestId("composer-attachment").count(), 0, "no chip for a refused file");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    // Nothing was sent.
    const r = await ctx.service(`/threads/${threadId}/messages`);
    assert.ok(r.status === 404 || r.body.messages.length === 0, `messages: ${r.status} ${JSON.stringify(r.body)}`);
  });
});
