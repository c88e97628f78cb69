// The library's buttons: Export (JSON and Markdown downloads) in a thread's
// toolbar and Import… in the sidebar.
//
// The service side (GET /threads/{id}/export, POST /threads/import) lives on
// another branch until it merges: every test here skips, and only then, when
// the service answers the export route with 404 "no such route".

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { browserSuite } from "./harness.mjs";
import { assistantMessages, norm, poll, threadIdFromUrl, userMessages } from "./helpers.mjs";

/** A thread with one question and its reply, made through the service. */
async function threadWith(ctx, text) {
  const threadId = randomUUID();
  await ctx.runDirect(threadId, { message: { content: text }, parent_message_id: null });
  return threadId;
}

/** Whether this service has the export route (false: it answers "no such route"). */
async function hasExport(ctx, threadId) {
  const r = await ctx.service(`/threads/${threadId}/export?format=json`);
  return !(r.status === 404 && /no such route/.test(r.body?.error?.message ?? ""));
}

async function download(page, testId) {
  const menu = page.getByTestId("export-menu");
  if (!(await menu.evaluate((el) => el.open))) await menu.locator("summary").click();
  const waiting = page.waitForEvent("download");
  await page.getByTestId(testId).click();
  const d = await waiting;
  return { name: d.suggestedFilename(), text: readFileSync(await d.path(), "utf8") };
}

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  test("export a thread as JSON and Markdown, import the JSON as a new thread", async ({ page, ctx, t }) => {
    const threadId = await threadWith(ctx, "library-export-question");
    if (!(await hasExport(ctx, threadId))) {
      t.skip("the service has no export route yet (GET /threads/{id}/export answers 404 no such route)");
      return;
    }
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await assistantMessages(page).first().waitFor();

    const json = await download(page, "export-json");
    assert.match(json.name, /\.json$/);
    assert.ok(json.text.includes("library-export-question"), `the JSON holds the question: ${json.text.slice(0, 200)}`);
    JSON.parse(json.text);
    const md = await download(page, "export-markdown");
    assert.match(md.name, /\.md$/);
    assert.ok(md.text.includes("library-export-question"), "the Markdown holds the question");

    const chooser = page.waitForEvent("filechooser");
    await page.getByRole("button", { name: "Import…" }).click();
    await (await chooser).setFiles({ name: json.name, mimeType: "application/json", buffer: Buffer.from(json.text) });
    await page.waitForURL((u) => /\/chat\/[0-9a-f-]{36}$/.test(u.pathname) && !u.pathname.endsWith(threadId));
    const imported = threadIdFromUrl(page);
    await poll(async () => norm(await userMessages(page).first().innerText()).includes("library-export-question"), {
      message: "the imported thread shows the question",
    });
    await page.locator(`[data-testid=thread-item][data-thread-id="${imported}"]`).waitFor();
  });

  test("a file that is not an export is refused in words", async ({ page, ctx, t }) => {
    const threadId = await threadWith(ctx, "library-refusal");
    if (!(await hasExport(ctx, threadId))) {
      t.skip("the service has no export route yet (GET /threads/{id}/export answers 404 no such route)");
      return;
    }
    await page.goto(`${ctx.baseUrl}/welcome`);
    const chooser = page.waitForEvent("filechooser");
    await page.getByRole("button", { name: "Import…" }).click();
    await (await chooser).setFiles({ name: "notes.json", mimeType: "application/json", buffer: Buffer.from("this is not JSON") });
    const err = page.getByTestId("import-error");
    await err.waitFor();
    assert.match(norm(await err.innerText()), /^Import failed: \S+/);
    assert.ok(page.url().endsWith("/welcome"), "stays on the page");
  });
});
