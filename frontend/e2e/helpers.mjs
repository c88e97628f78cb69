// Helpers of the browser tests: waiting, the page's parts, the service's
// view of a thread, fixtures.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { deflateSync } from "node:zlib";
import { AxeBuilder } from "@axe-core/playwright";

export const norm = (s) => (s ?? "").replace(/\s+/g, " ").trim();

export async function poll(fn, { timeout = 30_000, interval = 50, message = "condition" } = {}) {
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

export function textOf(message) {
  return (message?.content ?? [])
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");
}

/** A small valid PNG (a red 8x8 square). */
export function redPng() {
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

/** What a test gets as ctx: the stack (stack.mjs) and calls to the service itself. */
export function makeCtx(stack) {
  const { serviceUrl } = stack;
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
  return { ...stack, service, snapshot, runDirect };
}

// Page helpers
export const composer = (page) => page.getByLabel("Message", { exact: true });
export const stopButton = (page) => page.getByRole("button", { name: "Stop", exact: true });
export const sendButton = (page) => page.getByRole("button", { name: "Send", exact: true });
export const assistantMessages = (page) => page.getByTestId("assistant-message");
export const userMessages = (page) => page.getByTestId("user-message");
export const lastAssistantText = async (page) =>
  norm(await assistantMessages(page).last().getByTestId("message-text").innerText());

export async function send(page, text) {
  await composer(page).fill(text);
  await composer(page).press("Enter");
}

export async function waitIdle(page, timeout = 30_000) {
  await stopButton(page).waitFor({ state: "hidden", timeout });
  await sendButton(page).waitFor({ state: "visible", timeout });
}

/** A new, empty thread (made through the service: an unknown id is "not found"), opened. */
export async function openNewChat(page, ctx) {
  const threadId = randomUUID();
  const r = await ctx.service("/threads", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ thread_id: threadId }),
  });
  assert.ok(r.status === 201 || r.status === 200, `create thread: ${r.status} ${JSON.stringify(r.body)}`);
  await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
  await composer(page).waitFor();
  return threadId;
}

export function threadIdFromUrl(page) {
  const m = /\/chat\/([0-9a-f-]{36})/.exec(page.url());
  assert.ok(m, `a chat URL, got ${page.url()}`);
  return m[1];
}

/** The assistant reply the service stored on the visible path. */
export async function serverReply(ctx, threadId) {
  const snap = await ctx.snapshot(threadId);
  const last = snap.messages.at(-1);
  assert.equal(last.role, "assistant");
  return { text: norm(textOf(last)), message: last, snapshot: snap };
}

/** Sends a message in the UI and waits for the whole reply. */
export async function chatWithReply(page, ctx, text) {
  const threadId = await openNewChat(page, ctx);
  await send(page, text);
  await assistantMessages(page).first().waitFor();
  await waitIdle(page);
  return threadId;
}

export async function editFirstUserMessage(page, text) {
  const msg = userMessages(page).first();
  await msg.hover();
  await msg.getByRole("button", { name: "Edit" }).click();
  const editor = page.getByLabel("Edit message");
  await editor.waitFor();
  await editor.fill(text);
  await page.getByRole("button", { name: "Save and send" }).click();
}

/**
 * Sends a message to the "markdown" model with a "[gate:…]" prompt: the reply
 * streams GATED_BEFORE and then waits (the run stays running) until the test
 * calls ctx.releaseGate(gate). Returns the gate's name.
 */
export async function sendGated(page, ctx, text) {
  const gate = `ui-${randomUUID()}`;
  await page.getByLabel("Model", { exact: true }).selectOption("markdown");
  await send(page, `${text} [gate:${gate}]`);
  return gate;
}

/** Reads NDJSON events from a fetch body, one at a time (null at the end). */
export function ndjsonReader(body) {
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
export function deadline(ms, what) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`timed out after ${ms / 1000} s waiting for the ${what}`)), ms);
  return { signal: ac.signal, done: () => clearTimeout(timer) };
}

/** Serious and critical axe-core violations of the page as it is, as readable lines. */
export async function seriousViolations(page) {
  const { violations } = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]).analyze();
  return violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`);
}
