// Browser tests against the real stack (see run.mjs). Each test gets a fresh
// browser context; a failing test leaves a screenshot in e2e/artifacts/.

import { chromium } from "playwright-core";
import { randomUUID } from "node:crypto";
import assert from "node:assert/strict";
import { join } from "node:path";
import { deflateSync } from "node:zlib";
import { GATED_BEFORE, GATED_FIRST_TOKEN, GATED_REPLY } from "./fake-openai.mjs";

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

// ---------------------------------------------------------------- helpers

const norm = (s) => (s ?? "").replace(/\s+/g, " ").trim();

async function poll(fn, { timeout = 30_000, interval = 50, message = "condition" } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${message}${last instanceof Error ? `: ${last.message}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, interval));
  }
}

function textOf(message) {
  return (message?.content ?? [])
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");
}

/** A small valid PNG (a red 8x8 square). */
function redPng() {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, "ascii"), data]);
    const c = Buffer.alloc(4);
    c.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, c]);
  };
  const w = 8;
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(w, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const row = Buffer.concat([Buffer.from([0]), Buffer.alloc(w * 3, Buffer.from([255, 0, 0]))]);
  const raw = Buffer.concat(Array.from({ length: w }, () => row));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(raw)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

function makeCtx({ baseUrl, serviceUrl, dropConnections, releaseGate }) {
  const service = async (path, init) => {
    const res = await fetch(`${serviceUrl}/api/v1${path}`, init);
    const text = await res.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
    return { status: res.status, body, headers: res.headers };
  };
  const snapshot = async (threadId) => {
    const r = await service(`/threads/${threadId}/messages`);
    assert.equal(r.status, 200, `GET messages: ${JSON.stringify(r.body)}`);
    return r.body;
  };
  /** Runs a whole reply through the service directly; returns the events. */
  const runDirect = async (threadId, body) => {
    const res = await fetch(`${serviceUrl}/api/v1/threads/${threadId}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200);
    return (await res.text())
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  };
  return { baseUrl, serviceUrl, service, snapshot, runDirect, dropConnections, releaseGate };
}

// Page helpers
const composer = (page) => page.getByLabel("Message", { exact: true });
const stopButton = (page) => page.getByRole("button", { name: "Stop", exact: true });
const sendButton = (page) => page.getByRole("button", { name: "Send", exact: true });
const assistantMessages = (page) => page.getByTestId("assistant-message");
const userMessages = (page) => page.getByTestId("user-message");
const lastAssistantText = async (page) =>
  norm(await assistantMessages(page).last().getByTestId("message-text").innerText());

async function send(page, text) {
  await composer(page).fill(text);
  await composer(page).press("Enter");
}

async function waitIdle(page, timeout = 30_000) {
  await stopButton(page).waitFor({ state: "hidden", timeout });
  await sendButton(page).waitFor({ state: "visible", timeout });
}

async function openNewChat(page, ctx) {
  const threadId = randomUUID();
  await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
  await composer(page).waitFor();
  return threadId;
}

function threadIdFromUrl(page) {
  const m = /\/chat\/([0-9a-f-]{36})/.exec(page.url());
  assert.ok(m, `a chat URL, got ${page.url()}`);
  return m[1];
}

/** The assistant reply the service stored on the visible path. */
async function serverReply(ctx, threadId) {
  const snap = await ctx.snapshot(threadId);
  const last = snap.messages.at(-1);
  assert.equal(last.role, "assistant");
  return { text: norm(textOf(last)), message: last, snapshot: snap };
}

/** Sends a message in the UI and waits for the whole reply. */
async function chatWithReply(page, ctx, text) {
  const threadId = await openNewChat(page, ctx);
  await send(page, text);
  await assistantMessages(page).first().waitFor();
  await waitIdle(page);
  return threadId;
}

// ---------------------------------------------------------------- tests

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

test("send a message and see it stream", async ({ page, ctx }) => {
  const threadId = await openNewChat(page, ctx);
  await send(page, "Tell me a story");
  await userMessages(page).first().waitFor();
  assert.equal(norm(await userMessages(page).first().getByTestId("message-text").innerText()), "Tell me a story");
  // Two different partial lengths while the run is still going: it streams.
  const first = await poll(async () => {
    const t = await lastAssistantText(page);
    return t.length > 0 && (await stopButton(page).isVisible()) ? t : null;
  }, { message: "the first tokens" });
  await poll(async () => {
    const t = await lastAssistantText(page);
    return t.length > first.length && t.startsWith(first) && (await stopButton(page).isVisible());
  }, { message: "more tokens while running" });
  await waitIdle(page);
  const shown = await lastAssistantText(page);
  const { text } = await serverReply(ctx, threadId);
  assert.equal(shown, text, "the finished reply is the stored one");
  assert.equal(text.split(" ").length, 200, "the built-in model's 200 tokens");
  // The new thread is in the sidebar.
  await page.locator(`[data-testid=thread-item][data-thread-id="${threadId}"]`).waitFor({ timeout: 10_000 });
});

test("regenerate and see 2 / 2", async ({ page, ctx }) => {
  const threadId = await chatWithReply(page, ctx, "Regenerate this");
  const before = await lastAssistantText(page);
  await assistantMessages(page).last().hover();
  await page.getByRole("button", { name: "Regenerate" }).click();
  const count = assistantMessages(page).last().getByTestId("branch-count");
  await poll(async () => norm(await count.innerText()) === "2 / 2", { message: "2 / 2 on the reply" });
  await waitIdle(page);
  const after = await lastAssistantText(page);
  assert.notEqual(after, before, "a new reply");
  assert.equal(after, (await serverReply(ctx, threadId)).text);
  assert.equal(norm(await count.innerText()), "2 / 2");
  // The previous reply is one click away.
  await assistantMessages(page).last().getByRole("button", { name: "Previous branch" }).click();
  await poll(async () => (await lastAssistantText(page)) === before, { message: "the first reply back" });
  assert.equal(norm(await count.innerText()), "1 / 2");
});

async function editFirstUserMessage(page, text) {
  const msg = userMessages(page).first();
  await msg.hover();
  await msg.getByRole("button", { name: "Edit" }).click();
  const editor = page.getByLabel("Edit message");
  await editor.waitFor();
  await editor.fill(text);
  await page.getByRole("button", { name: "Save and send" }).click();
}

test("edit a user message and see the branch", async ({ page, ctx }) => {
  const threadId = await chatWithReply(page, ctx, "Original question");
  const firstReply = await lastAssistantText(page);
  await editFirstUserMessage(page, "Edited question");
  const user = userMessages(page).first();
  await poll(async () => norm(await user.getByTestId("branch-count").innerText()) === "2 / 2", {
    message: "2 / 2 on the user message",
  });
  assert.equal(norm(await user.getByTestId("message-text").innerText()), "Edited question");
  await waitIdle(page);
  const reply = await lastAssistantText(page);
  assert.notEqual(reply, firstReply);
  const { snapshot, text } = await serverReply(ctx, threadId);
  assert.equal(reply, text);
  assert.equal(textOf(snapshot.messages[0]), "Edited question");
  const roots = snapshot.messageRepository.messages.filter((m) => m.parentId === null);
  assert.equal(roots.length, 2, "the edit is a sibling of the original");
});

test("switch branches, reload, and see the same branch", async ({ page, ctx }) => {
  const threadId = await chatWithReply(page, ctx, "Branch one");
  const replyOne = await lastAssistantText(page);
  await editFirstUserMessage(page, "Branch two");
  const user = userMessages(page).first();
  await poll(async () => norm(await user.getByTestId("branch-count").innerText()) === "2 / 2", { message: "2 / 2" });
  await waitIdle(page);
  // Back to the first branch; the choice is reported with PUT .../head.
  const head = page.waitForResponse(
    (r) => r.url().endsWith(`/api/v1/threads/${threadId}/head`) && r.request().method() === "PUT",
  );
  await user.getByRole("button", { name: "Previous branch" }).click();
  const headRes = await head;
  assert.equal(headRes.status(), 204);
  await poll(async () => norm(await user.getByTestId("message-text").innerText()) === "Branch one", {
    message: "branch one shown",
  });
  assert.equal(await lastAssistantText(page), replyOne);
  await page.reload();
  const userAfter = userMessages(page).first();
  await poll(async () => norm(await userAfter.getByTestId("message-text").innerText()) === "Branch one", {
    message: "branch one after reload",
  });
  assert.equal(norm(await userAfter.getByTestId("branch-count").innerText()), "1 / 2");
  assert.equal(await lastAssistantText(page), replyOne);
  const snap = await ctx.snapshot(threadId);
  assert.equal(textOf(snap.messages[0]), "Branch one");
});

/**
 * Sends a message to the "markdown" model with a "[gate:…]" prompt: the reply
 * streams GATED_BEFORE and then waits (the run stays running) until the test
 * calls ctx.releaseGate(gate). Returns the gate's name.
 */
async function sendGated(page, ctx, text) {
  const gate = `ui-${randomUUID()}`;
  await page.getByLabel("Model").selectOption("markdown");
  await send(page, `${text} [gate:${gate}]`);
  return gate;
}

test("reload in the middle of a reply and see it finish exactly once", async ({ page, ctx }) => {
  if (!ctx.releaseGate) return console.log("     (skipped: needs the harness's fake model)");
  const threadId = await openNewChat(page, ctx);
  const gate = await sendGated(page, ctx, "A long answer, please");
  try {
    // Reload as soon as the reply shows, while its first words still stream.
    await poll(async () => (await lastAssistantText(page)).startsWith(GATED_FIRST_TOKEN), { message: "the first token" });
    await page.reload();
    // Rejoined: the run is shown running (it waits for the gate) with the
    // text from before the reload, and the rest of the first part arrives.
    await assistantMessages(page).first().waitFor();
    await stopButton(page).waitFor({ timeout: 15_000 });
    await poll(async () => (await lastAssistantText(page)) === GATED_BEFORE, {
      message: "the text streamed before and during the reload, once",
    });
    assert.ok((await ctx.snapshot(threadId)).active_run, "the run is still active");
  } finally {
    ctx.releaseGate(gate);
  }
  await waitIdle(page);
  const shown = await lastAssistantText(page);
  const { text, snapshot } = await serverReply(ctx, threadId);
  assert.equal(shown, text, "no repeated or missing text");
  assert.equal(text, GATED_REPLY);
  assert.equal(await assistantMessages(page).count(), 1);
  assert.equal(await userMessages(page).count(), 1);
  assert.equal(snapshot.messageRepository.messages.length, 2, "one run, one reply");
  assert.equal(snapshot.active_run, null);
});

test("reload while the built-in model streams and see the reply finish exactly once", async ({ page, ctx }) => {
  // The same with a reply that keeps streaming all through the reload; the
  // run may end before the page is back, so only the end result is checked.
  const threadId = await openNewChat(page, ctx);
  await send(page, "A long answer, please");
  await poll(async () => (await lastAssistantText(page)).length >= 40, { message: "some tokens" });
  await page.reload();
  await assistantMessages(page).first().waitFor();
  await waitIdle(page);
  const shown = await lastAssistantText(page);
  const { text, snapshot } = await serverReply(ctx, threadId);
  assert.equal(shown, text, "no repeated or missing text");
  assert.equal(shown.split(" ").length, 200);
  assert.equal(await assistantMessages(page).count(), 1);
  assert.equal(snapshot.messageRepository.messages.length, 2, "one run, one reply");
});

test("a dropped connection mid-reply rejoins the run without a reload", async ({ page, ctx }) => {
  if (!ctx.dropConnections || !ctx.releaseGate) return console.log("     (skipped: needs the harness's relay and fake model)");
  const threadId = await openNewChat(page, ctx);
  const rejoins = [];
  page.on("request", (r) => {
    if (/\/runs\/[0-9a-f-]+\/stream\?after=\d+$/.test(r.url())) rejoins.push(r.url());
  });
  const gate = await sendGated(page, ctx, "Keep going through a network blip");
  try {
    await poll(async () => (await lastAssistantText(page)).startsWith(GATED_FIRST_TOKEN), { message: "the first token" });
    // Cut the web app's connections to the service; both keep running, and
    // so does the run (it waits for the gate).
    assert.ok(ctx.dropConnections() >= 1, "a connection to cut");
    await poll(async () => rejoins.length >= 1, { message: "the page to rejoin with …/stream?after=N" });
  } finally {
    ctx.releaseGate(gate);
  }
  await waitIdle(page, 40_000);
  const shown = await lastAssistantText(page);
  const { text, snapshot } = await serverReply(ctx, threadId);
  assert.equal(shown, text, "no repeated or missing text");
  assert.equal(text, GATED_REPLY);
  assert.equal(snapshot.messageRepository.messages.length, 2);
  assert.equal(await assistantMessages(page).count(), 1);
});

test("cancel a reply", async ({ page, ctx }) => {
  if (!ctx.releaseGate) return console.log("     (skipped: needs the harness's fake model)");
  const threadId = await openNewChat(page, ctx);
  const gate = await sendGated(page, ctx, "Something I will stop");
  try {
    await poll(async () => (await lastAssistantText(page)).startsWith(GATED_FIRST_TOKEN), { message: "the first token" });
    await stopButton(page).click();
    await page.getByTestId("message-cancelled").waitFor({ timeout: 15_000 });
    await waitIdle(page);
  } finally {
    ctx.releaseGate(gate);
  }
  const shown = await lastAssistantText(page);
  const { text, message } = await serverReply(ctx, threadId);
  assert.equal(message.status.type, "incomplete");
  assert.equal(message.status.reason, "cancelled");
  assert.equal(shown, text);
  assert.ok(text.startsWith(GATED_FIRST_TOKEN) && GATED_BEFORE.startsWith(text), `stopped before the end: ${text}`);
  // The thread goes on after a cancelled reply.
  await send(page, "Next one");
  await poll(async () => (await userMessages(page).count()) === 2, { message: "second message" });
  await waitIdle(page);
  assert.equal((await serverReply(ctx, threadId)).message.status.type, "complete");
});

test("welcome handoff sends the first message once", async ({ page, ctx }) => {
  await page.goto(`${ctx.baseUrl}/`);
  await page.waitForURL("**/welcome");
  await send(page, "Hello from the welcome page");
  await page.waitForURL(/\/chat\/[0-9a-f-]{36}$/);
  const threadId = threadIdFromUrl(page);
  await userMessages(page).first().waitFor();
  assert.equal(
    norm(await userMessages(page).first().getByTestId("message-text").innerText()),
    "Hello from the welcome page",
  );
  await assistantMessages(page).first().waitFor();
  await waitIdle(page);
  const stored = await page.evaluate(() => Object.keys(sessionStorage).filter((k) => k.startsWith("threadline:")));
  assert.deepEqual(stored, [], "the handoff is used once");
  // A reload loads the thread and sends nothing.
  const runRequests = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && r.url().includes("/runs")) runRequests.push(r.url());
  });
  const loaded = page.waitForResponse((r) => r.url().endsWith(`/api/v1/threads/${threadId}/messages`));
  await page.reload();
  assert.equal((await loaded).status(), 200);
  await assistantMessages(page).first().waitFor();
  await waitIdle(page);
  assert.deepEqual(runRequests, [], "no run request after the reload");
  assert.equal(await userMessages(page).count(), 1);
  const snap = await ctx.snapshot(threadId);
  assert.equal(snap.messageRepository.messages.filter((m) => m.message.role === "user").length, 1);
  assert.equal(snap.messageRepository.messages.length, 2);
  // "New chat" goes back to the welcome composer.
  await page.getByTestId("new-chat").click();
  await page.waitForURL("**/welcome");
  await composer(page).waitFor();
});

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

  page.once("dialog", (d) => void d.accept());
  await item.hover();
  await item.getByRole("button", { name: "Delete" }).click();
  await page.waitForURL("**/welcome");
  await item.waitFor({ state: "detached" });
  assert.equal((await ctx.service(`/threads/${threadId}`)).status, 404);
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

test("attach an image", async ({ page, ctx }) => {
  const threadId = await openNewChat(page, ctx);
  const chooser = page.waitForEvent("filechooser");
  await page.getByRole("button", { name: "Attach image" }).click();
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
  const chooser = page.waitForEvent("filechooser");
  await page.getByRole("button", { name: "Attach image" }).click();
  // Over the service's default 10 MiB attachment limit.
  const big = Buffer.concat([redPng(), Buffer.alloc(11 * 1024 * 1024)]);
  await (await chooser).setFiles({ name: "big.png", mimeType: "image/png", buffer: big });
  await page.getByTestId("composer-attachment").waitFor();
  await send(page, "Too big?");
  const notice = page.getByTestId("thread-notice");
  await notice.waitFor({ timeout: 20_000 });
  const text = await notice.innerText();
  assert.ok(text.includes("big.png") && text.includes("too_large"), text);
  // Nothing was sent.
  assert.equal((await ctx.service(`/threads/${threadId}/messages`)).status, 404);
});

test("a model error is shown in the thread", async ({ page, ctx }) => {
  const threadId = await openNewChat(page, ctx);
  await send(page, "/fail model_not_configured");
  const err = page.getByTestId("message-error");
  await err.waitFor({ timeout: 15_000 });
  await poll(async () => (await err.innerText()).includes("model_not_configured"), { message: "the error code" });
  await waitIdle(page);
  const { message } = await serverReply(ctx, threadId);
  assert.equal(message.status.type, "incomplete");
  assert.equal(message.status.reason, "error");
  await page.reload();
  await page.getByTestId("message-error").waitFor({ timeout: 15_000 });
});

test("markdown and code blocks, with copy", async ({ page, ctx }) => {
  const threadId = await openNewChat(page, ctx);
  await page.getByLabel("Model").selectOption("markdown");
  await send(page, "Answer in Markdown");
  const reply = assistantMessages(page).last();
  await reply.locator("pre code").waitFor({ timeout: 20_000 });
  await waitIdle(page);
  assert.equal(norm(await reply.locator("strong").first().innerText()), "bold");
  assert.equal(await reply.locator("li").count(), 2);
  const code = await reply.locator("pre code").innerText();
  assert.ok(code.includes("def greet(name):") && code.includes('return f"hello {name}"'), code);
  assert.equal(norm(await reply.locator(".code-header span").innerText()), "python");
  await reply.getByRole("button", { name: "Copy code" }).waitFor();
  const { message } = await serverReply(ctx, threadId);
  assert.equal(message.status.type, "complete");
  assert.ok(textOf(message).includes("```python"));
  // The message's own copy button.
  await reply.hover();
  await reply.getByRole("button", { name: "Copy", exact: true }).click();
});

test("a missing model key says which variable to set", async ({ page, ctx }) => {
  const threadId = await openNewChat(page, ctx);
  await page.getByLabel("Model").selectOption("needs-key");
  await send(page, "Hello?");
  const err = page.getByTestId("message-error");
  await err.waitFor({ timeout: 15_000 });
  await poll(async () => {
    const t = await err.innerText();
    return t.includes("THREADLINE_E2E_MISSING_KEY") && t.includes("model_not_configured");
  }, { message: "the variable's name and the code in the error" });
  await waitIdle(page);
  const { message } = await serverReply(ctx, threadId);
  assert.equal(message.status.type, "incomplete");
});

/** Reads NDJSON events from a fetch body, one at a time (null at the end). */
function ndjsonReader(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  const queue = [];
  return {
    async next() {
      while (queue.length === 0) {
        const { done, value } = await reader.read();
        if (done) return null;
        buf += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          queue.push(JSON.parse(buf.slice(0, nl)));
          buf = buf.slice(nl + 1);
        }
      }
      return queue.shift();
    },
  };
}

/** An AbortSignal that fires after ms with a message saying what was late. */
function deadline(ms, what) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`timed out after ${ms / 1000} s waiting for the ${what}`)), ms);
  return { signal: ac.signal, done: () => clearTimeout(timer) };
}

test("proxy streams NDJSON unbuffered: the first token arrives while the model still holds the rest", async ({ page, ctx }) => {
  if (!ctx.releaseGate) return console.log("     (skipped: needs the harness's fake model)");
  // The "markdown" model (e2e/fake-openai.mjs) sends one token for a
  // "[gate:…]" prompt, then nothing until the test releases it. Through an
  // unbuffered proxy that token reaches the client while the run is still
  // waiting; a proxy that buffers (the whole body, a block of bytes, a gzip
  // stream) holds it back and the read below times out, whatever the load.
  const gated = (gate) => ({
    message: { content: `One token, then wait [gate:${gate}]` },
    parent_message_id: null,
    run_config: { model: "markdown" },
  });

  // 1) A plain fetch client (it asks for gzip) through the Next proxy.
  // The deadline covers the response's headers too: Next sends them with the
  // first chunk of the body.
  const gate = `node-${randomUUID()}`;
  const threadId = randomUUID();
  const firstToken = deadline(20_000, "first token through the proxy while the model holds the rest (does the proxy buffer?)");
  const seen = [];
  let events;
  try {
    const res = await fetch(`${ctx.baseUrl}/api/v1/threads/${threadId}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json", "accept-encoding": "gzip, deflate, br" },
      body: JSON.stringify(gated(gate)),
      signal: firstToken.signal,
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /ndjson/);
    assert.equal(res.headers.get("content-encoding"), null, "the stream is not compressed");
    events = ndjsonReader(res.body);
    for (;;) {
      const ev = await events.next();
      assert.ok(ev, "the stream ended before a token");
      seen.push(ev);
      if (ev.type === "token") break;
    }
    firstToken.done();
    assert.equal(seen.at(-1).text, GATED_FIRST_TOKEN);
    const run = await ctx.service(`/threads/${threadId}/runs/${seen[0].run_id}`);
    assert.equal(run.body.status, "running", "the run is still waiting for the model");
  } finally {
    firstToken.done();
    ctx.releaseGate(gate);
  }
  for (;;) {
    const ev = await events.next();
    if (!ev) break;
    seen.push(ev);
  }
  const last = seen.at(-1);
  assert.equal(last.type, "snapshot");
  assert.equal(last.run_status, "succeeded");
  seen.forEach((e, i) => assert.equal(e.sequence, i + 1, "every event, in order"));
  const tokens = seen.filter((e) => e.type === "token").map((e) => e.text).join("");
  assert.equal(tokens, GATED_REPLY);

  // 2) The browser, through the same origin (it asks for gzip, br and zstd).
  await page.goto(`${ctx.baseUrl}/welcome`);
  const browserGate = `browser-${randomUUID()}`;
  let browserResult;
  try {
    browserResult = await page.evaluate(async (body) => {
      const threadId = crypto.randomUUID();
      // The deadline covers the headers too (they come with the first chunk).
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), 20_000);
      let buf = "";
      try {
        const r = await fetch(`/api/v1/threads/${threadId}/runs/stream`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
          signal: ac.signal,
        });
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let runId = null;
        for (;;) {
          const chunk = await reader.read();
          if (chunk.done) return { error: "stream ended before a token", buf };
          buf += dec.decode(chunk.value, { stream: true });
          let nl;
          while ((nl = buf.indexOf("\n")) >= 0) {
            const ev = JSON.parse(buf.slice(0, nl));
            buf = buf.slice(nl + 1);
            if (ev.type === "snapshot") runId = ev.run_id;
            if (ev.type === "token") {
              clearTimeout(timer);
              const run = await (await fetch(`/api/v1/threads/${threadId}/runs/${runId}`)).json();
              await reader.cancel();
              return { status: run.status, text: ev.text, threadId, runId };
            }
          }
        }
      } catch (err) {
        return { error: ac.signal.aborted ? "no token within 20 s while the model waits (does the proxy buffer?)" : String(err), buf };
      } finally {
        clearTimeout(timer);
      }
    }, gated(browserGate));
  } finally {
    ctx.releaseGate(browserGate);
  }
  assert.equal(browserResult.error, undefined, JSON.stringify(browserResult));
  assert.equal(browserResult.text, GATED_FIRST_TOKEN);
  assert.equal(browserResult.status, "running", JSON.stringify(browserResult));
  // on_disconnect defaults to continue: the run still finishes.
  await poll(async () => (await ctx.service(`/threads/${browserResult.threadId}/runs/${browserResult.runId}`)).body.status === "succeeded", {
    message: "the browser's run to finish after it disconnected",
  });

  // 3) A long reply of the built-in model comes through whole and in order,
  // its first token while the run is running.
  const builtinThread = randomUUID();
  const res2 = await fetch(`${ctx.baseUrl}/api/v1/threads/${builtinThread}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ message: { content: "slow please" }, parent_message_id: null }),
  });
  assert.equal(res2.status, 200);
  const events2 = ndjsonReader(res2.body);
  const all = [];
  let statusAtFirstToken = null;
  for (;;) {
    const ev = await events2.next();
    if (!ev) break;
    all.push(ev);
    if (ev.type === "token" && statusAtFirstToken === null) {
      statusAtFirstToken = (await ctx.service(`/threads/${builtinThread}/runs/${ev.run_id}`)).body.status;
    }
  }
  assert.equal(statusAtFirstToken, "running", "the first token came through while the run was running");
  assert.equal(all.at(-1).type, "snapshot");
  assert.equal(all.at(-1).run_status, "succeeded");
  assert.equal(all.filter((e) => e.type === "token").length, 200);
  all.forEach((e, i) => assert.equal(e.sequence, i + 1, "every event, in order"));
});

test("proxy: closing the client connection closes the upstream one", async ({ ctx }) => {
  if (!ctx.releaseGate) return console.log("     (skipped: needs the harness's fake model)");
  // The model waits for the gate, so the run can only end through the
  // disconnect (on_disconnect: cancel), however slow the machine.
  const gate = `close-${randomUUID()}`;
  const threadId = randomUUID();
  const ac = new AbortController();
  try {
    const res = await fetch(`${ctx.baseUrl}/api/v1/threads/${threadId}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        message: { content: `abandon me [gate:${gate}]` },
        parent_message_id: null,
        run_config: { model: "markdown" },
        on_disconnect: "cancel",
      }),
      signal: ac.signal,
    });
    const events = ndjsonReader(res.body);
    const first = await events.next();
    assert.ok(first, "a snapshot first");
    const runId = first.run_id;
    assert.equal((await ctx.service(`/threads/${threadId}/runs/${runId}`)).body.status, "running");
    ac.abort();
    const status = await poll(async () => {
      const s = (await ctx.service(`/threads/${threadId}/runs/${runId}`)).body.status;
      return s !== "running" ? s : null;
    }, { timeout: 15_000, message: "the run to stop after the client left" });
    assert.equal(status, "cancelled");
  } finally {
    ctx.releaseGate(gate);
  }
});

test("proxy passes status codes, error bodies and headers through", async ({ ctx }) => {
  for (const [method, path, body] of [
    ["GET", "/threads/not-a-uuid", undefined],
    ["GET", `/threads/${randomUUID()}`, undefined],
    ["POST", `/threads/${randomUUID()}/runs/stream`, "{not json"],
    ["GET", "/threads?limit=1", undefined],
  ]) {
    const init = { method, headers: { "content-type": "application/json" }, body };
    const direct = await fetch(`${ctx.serviceUrl}/api/v1${path}`, init);
    const proxied = await fetch(`${ctx.baseUrl}/api/v1${path}`, init);
    assert.equal(proxied.status, direct.status, `${method} ${path}`);
    assert.equal(proxied.headers.get("content-type"), direct.headers.get("content-type"));
    assert.ok(proxied.headers.get("x-request-id"), "the service's x-request-id");
    const [a, b] = [await direct.json(), await proxied.json()];
    if (direct.status >= 400) assert.deepEqual(b.error.code, a.error.code);
    else assert.deepEqual(Object.keys(b), Object.keys(a));
  }
  // Uploads stream through too.
  const form = new FormData();
  form.append("file", new Blob([redPng()], { type: "image/png" }), "red.png");
  const up = await fetch(`${ctx.baseUrl}/api/v1/attachments`, { method: "POST", body: form });
  assert.ok(up.ok, `upload: ${up.status}`);
  const att = await up.json();
  const bytes = Buffer.from(await (await fetch(`${ctx.baseUrl}${att.url}`)).arrayBuffer());
  assert.deepEqual(bytes, redPng());
});

// ---------------------------------------------------------------- runner

export async function runTests({ baseUrl, serviceUrl, chromiumPath, artifacts, filter = "", dropConnections, releaseGate }) {
  const ctx = makeCtx({ baseUrl, serviceUrl, dropConnections, releaseGate });
  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: CHROMIUM_FLAGS });
  const results = [];
  const repeat = Math.max(1, Number(process.env.E2E_REPEAT) || 1); // flake hunting
  const selected = tests.filter((t) => !filter || t.name.includes(filter)).flatMap((t) => Array(repeat).fill(t));
  try {
    for (const t of selected) {
      const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
      const page = await context.newPage();
      page.setDefaultTimeout(20_000);
      const pageErrors = [];
      page.on("pageerror", (e) => pageErrors.push(e.message));
      const started = Date.now();
      try {
        await Promise.race([
          t.fn({ page, ctx }),
          new Promise((_, rej) => setTimeout(() => rej(new Error("test timed out after 90 s")), 90_000)),
        ]);
        assert.deepEqual(pageErrors, [], "no uncaught errors in the page");
        if (process.env.E2E_SCREENSHOTS) {
          const shot = join(artifacts, `${t.name.replace(/[^a-z0-9]+/gi, "-").toLowerCase()}.ok.png`);
          await page.screenshot({ path: shot }).catch(() => {});
        }
        results.push({ name: t.name, ok: true, ms: Date.now() - started });
        console.log(`ok   ${t.name} (${Date.now() - started} ms)`);
      } catch (err) {
        const file = join(artifacts, `${t.name.replace(/[^a-z0-9]+/gi, "-").toLowerCase()}.png`);
        await page.screenshot({ path: file, fullPage: true }).catch(() => {});
        results.push({ name: t.name, ok: false, ms: Date.now() - started, error: String(err?.stack ?? err) });
        console.log(`FAIL ${t.name} (${Date.now() - started} ms)\n     ${String(err?.stack ?? err).split("\n").join("\n     ")}\n     screenshot: ${file}`);
      } finally {
        await context.close().catch(() => {});
      }
    }
  } finally {
    await browser.close().catch(() => {});
  }
  const failed = results.filter((r) => !r.ok).length;
  console.log(`\n${results.length - failed} passed, ${failed} failed`);
  return { passed: results.length - failed, failed, results };
}
