// What a person expects of a chat app (issue 23): a draft that survives a
// failed send and a Retry, dark mode, a phone layout with a drawer, keyboard
// access, an axe-core scan of every page, the sidebar's dates and highlight
// without polling, tab titles, "not found", file chips, the model picker on
// the welcome page, each reply's details and "regenerate with". Screenshots
// of desktop, phone and dark mode are kept in e2e/artifacts/.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { GATED_FIRST_TOKEN } from "./fake-openai.mjs";
import { PHONE, browserSuite, keepScreenshot } from "./harness.mjs";
import {
  assistantMessages,
  chatWithReply,
  composer,
  lastAssistantText,
  norm,
  openNewChat,
  poll,
  send,
  serverReply,
  stopButton,
  textOf,
  threadIdFromUrl,
  userMessages,
  seriousViolations,
  waitIdle,
} from "./helpers.mjs";

/** The page's background lightness (0 black … 255 white): <html> carries the theme's background. */
async function lightness(page) {
  const rgb = await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
  const [r, g, b, a = 1] = rgb.match(/[\d.]+/g).map(Number);
  assert.equal(a, 1, `an opaque background: ${rgb}`);
  return 0.299 * r + 0.587 * g + 0.114 * b;
}

/** Makes a thread with one finished exchange through the service; returns its id. */
async function threadWithReply(ctx, text) {
  const id = randomUUID();
  await ctx.runDirect(id, { message: { content: text }, parent_message_id: null });
  return id;
}

browserSuite(import.meta.filename, (test) => {
  test("a failed send keeps the draft, and Retry sends it once", async ({ page, ctx, t }) => {
    if (!ctx.refuseService) return t.skip("needs the harness's relay");
    const threadId = await openNewChat(page, ctx);
    ctx.refuseService(true);
    try {
      await send(page, "Keep this draft");
      const notice = page.getByTestId("thread-notice");
      await notice.waitFor();
      assert.match(await notice.innerText(), /not answering|could not reach/i);
      assert.match(await notice.innerText(), /bad_gateway|network_error/);
      // The draft is back in the composer, not lost, and not shown as sent.
      await poll(async () => (await composer(page).inputValue()) === "Keep this draft", { message: "the draft back in the composer" });
      assert.equal(await userMessages(page).count(), 0);
    } finally {
      ctx.refuseService(false);
    }
    await page.getByTestId("thread-notice").getByRole("button", { name: "Retry" }).click();
    await userMessages(page).first().waitFor();
    await waitIdle(page);
    assert.equal(await composer(page).inputValue(), "");
    assert.equal(await page.getByTestId("thread-notice").count(), 0, "the notice is gone");
    const snap = await ctx.snapshot(threadId);
    const users = snap.messageRepository.messages.filter((m) => m.message.role === "user");
    assert.equal(users.length, 1, "sent once");
    assert.equal(textOf(users[0].message), "Keep this draft");
    assert.equal(await userMessages(page).count(), 1);
  });

  test("a send while another tab's reply runs keeps the draft; Retry sends it after", async ({ page, ctx, t }) => {
    if (!ctx.releaseGate) return t.skip("needs the harness's fake model");
    const threadId = await threadWithReply(ctx, "First question");
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await assistantMessages(page).first().waitFor();
    await waitIdle(page);
    // "Another tab": a run started straight at the service, held by the fake model.
    const gate = `tab-${randomUUID()}`;
    const head = (await ctx.snapshot(threadId)).messages.at(-1).id;
    const other = fetch(`${ctx.serviceUrl}/api/v1/threads/${threadId}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ message: { content: `Other tab [gate:${gate}]` }, parent_message_id: head, run_config: { model: "markdown" } }),
    }).then((r) => r.text());
    try {
      await poll(async () => (await ctx.snapshot(threadId)).active_run, { message: "the other tab's run" });
      await send(page, "My follow-up");
      const notice = page.getByTestId("thread-notice");
      await notice.waitFor();
      assert.match(await notice.innerText(), /run_in_progress/);
      assert.match(await notice.innerText(), /still being written/);
      await poll(async () => (await composer(page).inputValue()) === "My follow-up", { message: "the draft back in the composer" });
      // The page shows the other tab's reply streaming meanwhile.
      await poll(async () => (await lastAssistantText(page)).startsWith(GATED_FIRST_TOKEN), { message: "the other run shown" });
    } finally {
      ctx.releaseGate(gate);
    }
    await other;
    await waitIdle(page);
    await page.getByTestId("thread-notice").getByRole("button", { name: "Retry" }).click();
    await poll(async () => (await userMessages(page).count()) === 3, { message: "the follow-up sent" });
    await waitIdle(page);
    const snap = await ctx.snapshot(threadId);
    const mine = snap.messageRepository.messages.filter((m) => m.message.role === "user" && textOf(m.message) === "My follow-up");
    assert.equal(mine.length, 1, "sent once");
    assert.equal(await composer(page).inputValue(), "");
  });

  test("Escape in the composer does not stop the reply", async ({ page, ctx, t }) => {
    if (!ctx.releaseGate) return t.skip("needs the harness's fake model");
    const threadId = await openNewChat(page, ctx);
    const gate = `esc-${randomUUID()}`;
    await page.getByLabel("Model", { exact: true }).selectOption("markdown");
    await send(page, `Keep going [gate:${gate}]`);
    try {
      await poll(async () => (await lastAssistantText(page)).startsWith(GATED_FIRST_TOKEN), { message: "the first token" });
      await composer(page).focus();
      await page.keyboard.press("Escape");
      // Give a cancel every chance to happen, then check none did.
      await page.waitForTimeout(1000);
      assert.ok(await stopButton(page).isVisible(), "still running in the page");
      const run = (await ctx.snapshot(threadId)).active_run;
      assert.ok(run, "still running at the service");
    } finally {
      ctx.releaseGate(gate);
    }
    await waitIdle(page);
    const { message } = await serverReply(ctx, threadId);
    assert.equal(message.status.type, "complete");
  });

  test("keyboard: Tab reaches Edit, Copy and Regenerate on older messages, shown on focus", async ({ page, ctx }) => {
    const threadId = await chatWithReply(page, ctx, "Older question");
    await send(page, "Newer question");
    await poll(async () => (await userMessages(page).count()) === 2, { message: "second message" });
    await waitIdle(page);
    const older = userMessages(page).first();
    const olderReply = assistantMessages(page).first();
    const targets = {
      edit: older.getByRole("button", { name: "Edit" }),
      copy: olderReply.getByRole("button", { name: "Copy", exact: true }),
      regenerate: olderReply.getByRole("button", { name: "Regenerate", exact: true }),
    };
    // Hidden while neither hovered nor focused (the mouse is elsewhere).
    await page.mouse.move(5, 790);
    const opacity = (loc) => loc.evaluate((el) => getComputedStyle(el.closest(".action-bar")).opacity);
    assert.equal(await opacity(targets.edit), "0", "older actions hidden at rest");
    const reached = new Set();
    await page.locator("body").focus();
    for (let i = 0; i < 120 && reached.size < 3; i++) {
      await page.keyboard.press("Tab");
      for (const [name, loc] of Object.entries(targets)) {
        if (reached.has(name)) continue;
        if (await loc.evaluate((el) => el === document.activeElement)) {
          reached.add(name);
          assert.equal(await opacity(loc), "1", `${name} shown while focused`);
          const outline = await loc.evaluate((el) => getComputedStyle(el).outlineStyle);
          assert.notEqual(outline, "none", `${name} has a focus ring`);
        }
      }
    }
    assert.deepEqual([...reached].sort(), ["copy", "edit", "regenerate"], "every action reached with Tab");
    // Enter on the focused Edit opens the editor.
    await targets.edit.focus();
    await page.keyboard.press("Enter");
    await page.getByLabel("Edit message").waitFor();
    assert.ok(threadId);
  });

  test("dark mode follows the system, the toggle overrides it and sticks", async ({ page, ctx }) => {
    const threadId = await threadWithReply(ctx, "Dark mode please");
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await assistantMessages(page).first().waitFor();
    assert.ok((await lightness(page)) < 60, "dark background under prefers-color-scheme: dark");
    await keepScreenshot(page, "dark-mode");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, dark mode");
    const toggle = page.getByTestId("theme-toggle");
    // system → dark → light
    await toggle.click();
    await poll(async () => (await toggle.getAttribute("data-theme-choice")) === "dark", { message: "dark chosen" });
    await toggle.click();
    await poll(async () => (await toggle.getAttribute("data-theme-choice")) === "light", { message: "light chosen" });
    await poll(async () => (await lightness(page)) > 200, { message: "a light background" });
    await page.reload();
    await assistantMessages(page).first().waitFor();
    assert.ok((await lightness(page)) > 200, "the choice survives a reload, before any click");
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), "light");
  }, { colorScheme: "dark" });

  test("phone: the drawer opens, lists the threads and switches between them", async ({ page, ctx }) => {
    const a = await threadWithReply(ctx, "Phone thread A");
    const b = await threadWithReply(ctx, "Phone thread B");
    await page.goto(`${ctx.baseUrl}/chat/${a}`);
    await assistantMessages(page).first().waitFor();
    const menu = page.getByRole("button", { name: "Open the thread list" });
    await menu.waitFor();
    const sidebar = page.getByRole("navigation", { name: "Threads" });
    assert.equal(await sidebar.isVisible(), false, "the sidebar is a closed drawer");
    await keepScreenshot(page, "phone");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, phone");
    await menu.click();
    await sidebar.waitFor({ state: "visible" });
    assert.equal(await menu.getAttribute("aria-expanded"), "true");
    await poll(async () => (await sidebar.locator(`[data-thread-id="${b}"]`).count()) === 1, { message: "thread B listed" });
    await keepScreenshot(page, "phone-drawer");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, phone drawer");
    await sidebar.locator(`[data-thread-id="${b}"] a`).first().click();
    await page.waitForURL(`**/chat/${b}`);
    await sidebar.waitFor({ state: "hidden" });
    await poll(async () => norm(await userMessages(page).first().innerText()).includes("Phone thread B"), { message: "thread B shown" });
    // Escape closes an opened drawer too, and gives the focus back to the menu button.
    await menu.click();
    await sidebar.waitFor({ state: "visible" });
    await page.keyboard.press("Escape");
    await sidebar.waitFor({ state: "hidden" });
    assert.ok(await menu.evaluate((el) => el === document.activeElement), "focus back on the menu button");
    // "New chat" from the top bar.
    await page.getByRole("link", { name: "New chat" }).first().click();
    await page.waitForURL("**/welcome");
  }, { viewport: PHONE, isMobile: true });

  test("axe-core finds no serious violation on any page; desktop screenshots", async ({ page, ctx }) => {
    await page.goto(`${ctx.baseUrl}/welcome`);
    await composer(page).waitFor();
    await poll(async () => (await page.getByLabel("Model", { exact: true }).count()) === 1, { message: "the model picker" });
    assert.deepEqual(await seriousViolations(page), [], "axe-core, /welcome");
    await keepScreenshot(page, "desktop-welcome");

    const threadId = randomUUID();
    await ctx.runDirect(threadId, { message: { content: "Answer in Markdown" }, parent_message_id: null, run_config: { model: "markdown" } });
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await assistantMessages(page).first().locator("pre code .token").first().waitFor();
    await page.getByTestId("reply-details").first().waitFor();
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a chat");
    await keepScreenshot(page, "desktop-chat");

    await page.goto(`${ctx.baseUrl}/chat/${randomUUID()}`);
    await page.getByTestId("not-found").waitFor();
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a conversation not found");

    await page.goto(`${ctx.baseUrl}/no-such-page`);
    await page.getByTestId("not-found").waitFor();
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a page not found");
  });

  test("an unknown thread: a not-found page, and no request storm", async ({ page, ctx }) => {
    const requests = [];
    page.on("request", (r) => {
      if (new URL(r.url()).pathname.startsWith("/api/v1/")) requests.push(new URL(r.url()).pathname);
    });
    const unknown = randomUUID();
    await page.goto(`${ctx.baseUrl}/chat/${unknown}`);
    const nf = page.getByTestId("not-found");
    await nf.waitFor();
    assert.match(await nf.innerText(), /Conversation not found/);
    // The tab title is set by an effect after the page renders.
    await poll(async () => (await page.title()) === "Not found · Threadline", { message: "the not-found tab title" });
    await page.waitForTimeout(4000);
    const lists = requests.filter((p) => p === "/api/v1/threads");
    assert.ok(lists.length <= 1, `thread list fetched ${lists.length} times in 4 s: ${JSON.stringify(requests)}`);
    assert.ok(requests.length <= 6, `at most a handful of API requests, got ${requests.length}: ${JSON.stringify(requests)}`);
    await nf.getByRole("link", { name: "Start a new chat" }).click();
    await page.waitForURL("**/welcome");
  });

  test("sidebar: dates grouped, full titles on hover, the open thread highlighted; tab titles", async ({ page, ctx }) => {
    const long = `A rather long title that goes on well past twenty-two characters ${randomUUID().slice(0, 8)}`;
    const id = await threadWithReply(ctx, "Title me");
    await ctx.service(`/threads/${id}`, {
      method: "PATCH",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ title: long }),
    });
    await page.goto(`${ctx.baseUrl}/chat/${id}`);
    const item = page.locator(`[data-testid=thread-item][data-thread-id="${id}"]`);
    await item.waitFor();
    const group = page.getByTestId("thread-group").filter({ has: item });
    assert.equal(norm(await group.locator("h2").innerText()), "Today");
    const link = item.getByRole("link");
    assert.ok((await link.getAttribute("title")).startsWith(long), "the full title on hover");
    assert.equal(await link.getAttribute("aria-current"), "page", "the open thread is marked");
    assert.match(await item.getAttribute("class"), /active/);
    await poll(async () => (await page.title()) === `${long} · Threadline`, { message: "the tab's title" });

    // A new thread's tab gets its title once the service gives it one.
    const fresh = await chatWithReply(page, ctx, "Name this conversation");
    const title = await poll(async () => (await ctx.service(`/threads/${fresh}`)).body?.title, { message: "a title from the service" });
    await poll(async () => (await page.title()) === `${title} · Threadline`, { message: "the new thread's tab title" });
  });

  test("text, Markdown, CSV, JSON and PDF files as file chips", async ({ page, ctx }) => {
    const threadId = await openNewChat(page, ctx);
    const files = [
      { name: "notes.pdf", mimeType: "application/pdf", buffer: Buffer.from("%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n") },
      { name: "data.csv", mimeType: "text/csv", buffer: Buffer.from("a,b\n1,2\n") },
      { name: "readme.md", mimeType: "text/markdown", buffer: Buffer.from("# Title\n") },
      { name: "config.json", mimeType: "application/json", buffer: Buffer.from('{"a":1}') },
      { name: "plain.txt", mimeType: "text/plain", buffer: Buffer.from("hello") },
    ];
    const chooser = page.waitForEvent("filechooser");
    await page.getByRole("button", { name: "Attach a file" }).click();
    await (await chooser).setFiles(files);
    const chips = page.getByTestId("composer-attachment");
    await poll(async () => (await chips.count()) === files.length, { message: "a chip per file" });
    assert.deepEqual((await chips.evaluateAll((els) => els.map((e) => e.dataset.kind))).sort(), ["csv", "json", "md", "pdf", "txt"]);
    await send(page, "Read these");
    const sent = userMessages(page).first().getByTestId("message-attachment");
    await poll(async () => (await sent.count()) === files.length, { message: "the chips on the sent message" });
    const pdf = sent.filter({ hasText: "notes.pdf" });
    assert.equal(await pdf.getAttribute("data-kind"), "pdf");
    assert.match((await pdf.getByRole("link").getAttribute("href")) ?? "", /^\/api\/v1\/attachments\//);
    await waitIdle(page);
    const user = (await ctx.snapshot(threadId)).messages[0];
    assert.deepEqual(user.attachments.map((a) => a.contentType).sort(), ["application/json", "application/pdf", "text/csv", "text/markdown", "text/plain"]);
    await page.reload();
    const after = userMessages(page).first().getByTestId("message-attachment");
    await poll(async () => (await after.count()) === files.length, { message: "the chips after a reload" });
    assert.equal(await after.filter({ hasText: "notes.pdf" }).getAttribute("data-kind"), "pdf");
  });

  test("the model picker on the welcome page lists each model once and applies", async ({ page, ctx }) => {
    await page.goto(`${ctx.baseUrl}/welcome`);
    const picker = page.getByLabel("Model", { exact: true });
    await picker.waitFor();
    const options = (await picker.locator("option").allInnerTexts()).map(norm);
    const names = options.map((o) => o.replace(/ \(.*\)$/, ""));
    assert.equal(names.filter((n) => n === "builtin").length, 1, `builtin once: ${options}`);
    assert.equal(new Set(names).size, names.length, `each model once: ${options}`);
    assert.ok(options.includes("builtin (default)"), `${options}`);
    assert.ok(options.some((o) => o.startsWith("markdown")), `${options}`);
    await picker.selectOption("markdown");
    await send(page, "Answer in Markdown please");
    await page.waitForURL(/\/chat\/[0-9a-f-]{36}$/);
    const threadId = threadIdFromUrl(page);
    await assistantMessages(page).first().locator("strong").waitFor();
    await waitIdle(page);
    const { message } = await serverReply(ctx, threadId);
    const run = await ctx.service(`/threads/${threadId}/runs/${message.metadata.custom.runId}`);
    assert.match(run.body.model, /^markdown\b/);
  });

  test("each reply's model, time and usage; regenerate with another model", async ({ page, ctx }) => {
    const threadId = await chatWithReply(page, ctx, "Details please");
    const details = assistantMessages(page).last().getByTestId("reply-details");
    await poll(async () => /builtin/.test(await details.innerText()) && /tokens/.test(await details.innerText()), {
      message: "model and usage under the reply",
    });
    assert.match(await details.innerText(), /\d{1,2}:\d{2}/, "the time");
    const reply = assistantMessages(page).last();
    await reply.getByLabel("Regenerate with another model").selectOption("markdown");
    const count = assistantMessages(page).last().getByTestId("branch-count");
    await poll(async () => norm(await count.innerText()) === "2 / 2", { message: "2 / 2 on the reply" });
    await assistantMessages(page).last().locator("strong").waitFor();
    await waitIdle(page);
    const { message } = await serverReply(ctx, threadId);
    const run = await ctx.service(`/threads/${threadId}/runs/${message.metadata.custom.runId}`);
    assert.match(run.body.model, /^markdown\b/);
    await poll(async () => /markdown/.test(await assistantMessages(page).last().getByTestId("reply-details").innerText()), {
      message: "the new reply's details name its model",
    });
  });
});
