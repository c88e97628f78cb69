// Attachments in the composer (issue 30, item 5): the file chooser, drag
// and drop with a visible drop zone, the welcome page's first message with
// an image, refused files said in words without losing the draft, and a
// thumbnail that opens the image large. The new ones run on desktop and phone.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { browserSuite, keepScreenshot, onBothViewports } from "./harness.mjs";
import {
  composer,
  seriousViolations,
  threadIdFromUrl,
  poll,
  textOf,
  redPng,
  userMessages,
  send,
  waitIdle,
  openNewChat,
  norm,
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

  onBothViewports(test, "drag a file onto the thread: a drop zone shows, the image is attached and sent", async ({ page, ctx, phone }) => {
    const threadId = await openNewChat(page, ctx);
    await composer(page).fill("Here is a picture");
    const zone = page.getByTestId("dropzone");
    const overlay = page.getByTestId("drop-overlay");
    assert.equal(await overlay.isVisible(), false, "no drop zone before a drag");
    const files = await dataTransfer(page, [{ name: "dropped.png", type: "image/png", data: redPng() }]);
    await zone.dispatchEvent("dragenter", { dataTransfer: files });
    await zone.dispatchEvent("dragover", { dataTransfer: files });
    await overlay.waitFor({ state: "visible" });
    assert.match(norm(await overlay.innerText()), /Drop files to attach them/);
    await keepScreenshot(page, phone ? "drop-zone-phone" : "drop-zone");
    await zone.dispatchEvent("drop", { dataTransfer: files });
    await overlay.waitFor({ state: "hidden" });
    await page.getByTestId("composer-attachment").waitFor();
    assert.equal(await composer(page).inputValue(), "Here is a picture", "the draft is kept");
    await composer(page).press("Enter");
    await userMessages(page).first().getByTestId("message-attachment").locator("img").waitFor();
    await waitIdle(page);
    const snap = await ctx.snapshot(threadId);
    assert.equal(snap.messages[0].attachments?.length, 1);
    assert.equal(snap.messages[0].attachments[0].name, "dropped.png");
  });

  onBothViewports(test, "a dropped file of a refused type says why in words and keeps the draft", async ({ page, ctx }) => {
    await openNewChat(page, ctx);
    const uploads = [];
    page.on("request", (req) => {
      if (req.method() === "POST" && new URL(req.url()).pathname.endsWith("/attachments")) uploads.push(req.url());
    });
    await composer(page).fill("Please keep this text");
    const files = await dataTransfer(page, [{ name: "archive.zip", type: "application/zip", data: Buffer.from("PK\x03\x04") }]);
    const zone = page.getByTestId("dropzone");
    await zone.dispatchEvent("dragenter", { dataTransfer: files });
    await zone.dispatchEvent("drop", { dataTransfer: files });
    const notice = page.getByTestId("thread-notice");
    await notice.waitFor();
    const text = norm(await notice.innerText());
    assert.match(text, /Could not attach archive\.zip: files of this kind \(application\/zip\) cannot be attached/, text);
    assert.match(text, /You can attach images \(PNG, JPEG, GIF, WebP\) and text, Markdown, CSV, JSON or PDF files/, text);
    assert.doesNotMatch(text, /Accepted types:/, "the runtime's raw list is not shown");
    assert.equal(await composer(page).inputValue(), "Please keep this text", "the draft is kept");
    assert.equal(await page.getByTestId("composer-attachment").count(), 0);
    assert.deepEqual(uploads, [], "nothing was uploaded");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the refusal");
  });

  onBothViewports(test, "paste a file into the composer: an image is attached and sent; a refused type is named in words", async ({ page, ctx }) => {
    const threadId = await openNewChat(page, ctx);
    const uploads = [];
    page.on("request", (req) => {
      if (req.method() === "POST" && new URL(req.url()).pathname.endsWith("/attachments")) uploads.push(req.url());
    });
    await composer(page).fill("Pasted, see below");
    const paste = async (files) => {
      const dt = await dataTransfer(page, files);
      await composer(page).evaluate((el, clipboardData) => {
        el.dispatchEvent(new ClipboardEvent("paste", { clipboardData, bubbles: true, cancelable: true }));
      }, dt);
    };
    await paste([{ name: "setup.exe", type: "application/x-msdownload", data: Buffer.from("MZ") }]);
    const notice = page.getByTestId("thread-notice");
    await notice.waitFor();
    const text = norm(await notice.innerText());
    assert.match(text, /Could not attach setup\.exe: files of this kind \(application\/x-msdownload\) cannot be attached/, text);
    assert.equal(await composer(page).inputValue(), "Pasted, see below", "the draft is kept");
    assert.deepEqual(uploads, [], "nothing was uploaded");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the refusal of a pasted file");

    await paste([{ name: "pasted.png", type: "image/png", data: redPng() }]);
    await page.getByTestId("composer-attachment").waitFor();
    assert.equal(await composer(page).inputValue(), "Pasted, see below", "the text stays as it was");
    await composer(page).press("Enter");
    await userMessages(page).first().getByTestId("message-attachment").locator("img").waitFor();
    await waitIdle(page);
    const snap = await ctx.snapshot(threadId);
    assert.equal(snap.messages[0].attachments?.length, 1);
    assert.equal(snap.messages[0].attachments[0].name, "pasted.png");
    assert.equal(uploads.length, 1, "the image uploaded once");
  });

  onBothViewports(test, "the welcome page: the first message carries an image", async ({ page, ctx }) => {
    await page.goto(`${ctx.baseUrl}/welcome`);
    await composer(page).waitFor();
    await composer(page).fill("Describe my first picture");
    const chooser = page.waitForEvent("filechooser");
    await page.getByRole("button", { name: "Attach a file" }).click();
    await (await chooser).setFiles({ name: "first.png", mimeType: "image/png", buffer: redPng() });
    await page.getByTestId("composer-attachment").waitFor();
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the welcome page with an attachment");
    await composer(page).press("Enter");
    await page.waitForURL(/\/chat\/[0-9a-f-]{36}/);
    const threadId = threadIdFromUrl(page);
    const img = userMessages(page).first().getByTestId("message-attachment").locator("img");
    await poll(async () => img.evaluate((el) => el.complete && el.naturalWidth === 8), { message: "the image in the first message" });
    await waitIdle(page);
    const snap = await ctx.snapshot(threadId);
    assert.equal(textOf(snap.messages[0]), "Describe my first picture");
    assert.equal(snap.messages[0].attachments?.length, 1);
    assert.equal(snap.messages[0].attachments[0].contentType, "image/png");
  });

  onBothViewports(test, "the welcome page: a file over the limit is refused in words, the draft kept", async ({ page, ctx }) => {
    await page.goto(`${ctx.baseUrl}/welcome`);
    await composer(page).waitFor();
    await composer(page).fill("My words stay");
    const limits = await ctx.service("/limits");
    const max = limits.body.max_attachment_bytes;
    const files = await dataTransfer(page, [{ name: "huge.txt", type: "text/plain", size: max + 1 }]);
    const zone = page.getByTestId("dropzone");
    await zone.dispatchEvent("dragenter", { dataTransfer: files });
    await zone.dispatchEvent("drop", { dataTransfer: files });
    const notice = page.getByTestId("thread-notice");
    await notice.waitFor();
    assert.match(norm(await notice.innerText()), /Could not attach huge\.txt: it is .* over the .* limit/);
    assert.equal(await composer(page).inputValue(), "My words stay");
    assert.ok(page.url().endsWith("/welcome"), "nothing was sent");
  });

  onBothViewports(test, "a thumbnail opens the image large; Escape closes it and the focus comes back", async ({ page, ctx, phone }) => {
    await openNewChat(page, ctx);
    const chooser = page.waitForEvent("filechooser");
    await page.getByRole("button", { name: "Attach a file" }).click();
    await (await chooser).setFiles({ name: "big-view.png", mimeType: "image/png", buffer: redPng() });
    await page.getByTestId("composer-attachment").waitFor();
    await send(page, "Look");
    await waitIdle(page);
    const thumb = userMessages(page).first().getByRole("button", { name: "Open the image big-view.png" });
    await thumb.click();
    const dialog = page.getByTestId("image-dialog");
    await dialog.waitFor({ state: "visible" });
    const large = dialog.locator("img");
    await poll(async () => large.evaluate((el) => el.complete && el.naturalWidth === 8), { message: "the large image" });
    const width = await large.evaluate((el) => el.getBoundingClientRect().width);
    assert.ok(width >= 200, `shown large: ${width} px wide`);
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the image dialog");
    await keepScreenshot(page, phone ? "image-dialog-phone" : "image-dialog");
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    await poll(async () => thumb.evaluate((el) => el === document.activeElement), { message: "the focus back on the thumbnail" });
  });
});

/** A DataTransfer holding files ({name, type, data} or {name, type, size} of zeros), made in the page. */
async function dataTransfer(page, files) {
  return page.evaluateHandle((list) => {
    const dt = new DataTransfer();
    for (const f of list) {
      const bytes = f.b64 ? Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0)) : new Uint8Array(f.size);
      dt.items.add(new File([bytes], f.name, { type: f.type }));
    }
    return dt;
  }, files.map((f) => ({ name: f.name, type: f.type, b64: f.data ? f.data.toString("base64") : null, size: f.size ?? 0 })));
}
