// Sub-agents in the app (issue 28) with the built-in demo model: asked to
// research three options in parallel it delegates to three sub-agents, each
// a child thread of its own. The cards show them live (collapsed; opened,
// the child's conversation grows), rejoin after a reload, say cancelled
// after Stop, and a child opens as a thread that links back.
//
// This suite's model is slower per token than the others' so that a card
// can be opened, a page reloaded or a turn stopped while sub-agents stream.

import assert from "node:assert/strict";
import { browserSuite, keepScreenshot, onBothViewports } from "./harness.mjs";
import { assistantMessages, norm, openNewChat, poll, send, seriousViolations, stopButton, waitIdle } from "./helpers.mjs";

const DEMO = "builtin:demo";
const PROMPT = "Research three options in parallel";
const TITLES = ["Postgres", "SQLite", "an embedded key-value store"];
// The parent's summary repeats the three answers: at this suite's pace it takes a while.
const IDLE = 60_000;
const SLOW = { timeout: 150_000 };

async function useDemo(page) {
  await page.evaluate((m) => window.localStorage.setItem("threadline:model", m), DEMO);
}

const cards = (page) => assistantMessages(page).last().getByTestId("subagent");
const card = (page, title) => cards(page).filter({ has: page.getByTestId("subagent-title").getByText(title, { exact: true }) });
const stateOf = (c) => c.getAttribute("data-state");
const toggle = (c) => c.getByRole("button", { name: /./ }).first();

/** The child's reply text inside an open card ("" while none shows). */
async function childText(c) {
  const t = c.getByTestId("subagent-text");
  return (await t.count()) ? norm(await t.last().innerText()) : "";
}

/** Sends the demo prompt; waits for three cards with their sub-agents running. */
async function startThree(page, ctx) {
  const threadId = await openNewChat(page, ctx);
  await useDemo(page);
  await send(page, PROMPT);
  await poll(async () => (await cards(page).count()) === 3, { message: "three sub-agent cards" });
  return threadId;
}

/** The stored delegate calls of the parent's last turn. */
async function storedCalls(ctx, threadId) {
  const turn = (await ctx.snapshot(threadId)).messages.at(-1);
  return turn.content.filter((p) => p.type === "tool-call" && p.toolName === "delegate");
}

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  onBothViewports(test, "three live sub-agents: collapsed cards, one opened while it streams, all succeed, then the summary", async ({ page, ctx, phone }) => {
    const threadId = await startThree(page, ctx);
    // Each title shows once its call's arguments streamed in ("Sub-agent" before).
    const titles = async () => (await cards(page).getByTestId("subagent-title").allInnerTexts()).map(norm);
    await poll(async () => JSON.stringify(await titles()) === JSON.stringify(TITLES), { message: "the three titles" });
    assert.deepEqual(await titles(), TITLES);
    for (const c of await cards(page).all()) {
      assert.equal(await toggle(c).getAttribute("aria-expanded"), "false", "collapsed by default");
      assert.equal(await c.getByTestId("subagent-body").count(), 0);
    }
    const first = card(page, "Postgres");
    await poll(async () => (await stateOf(first)) === "running", { message: "the first sub-agent running" });
    await first.getByTestId("subagent-elapsed").waitFor();
    await toggle(first).click();
    assert.equal(await toggle(first).getAttribute("aria-expanded"), "true");
    // The child's first message is its task.
    await poll(async () => /Look into Postgres as an option/.test(norm(await first.getByTestId("subagent-body").innerText())), {
      message: "the task in the open card",
    });
    // Its text grows while it streams.
    let seen = "";
    await poll(async () => {
      seen = await childText(first);
      return seen.length > 0;
    }, { message: "the sub-agent's first words" });
    const early = seen;
    assert.equal(await stateOf(first), "running", "opened while it still streams");
    await keepScreenshot(page, phone ? "subagents-live-phone" : "subagents-live");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, an open sub-agent card streaming");
    await poll(async () => (await childText(first)).length > early.length, { message: "the sub-agent's text grows" });
    assert.ok((await childText(first)).startsWith(early), "it grows at its end");

    for (const t of TITLES) await poll(async () => (await stateOf(card(page, t))) === "succeeded", { message: `${t} succeeded` });
    await waitIdle(page, IDLE);
    assert.match(norm(await first.getByTestId("subagent-state").innerText()), /^succeeded$/);
    const answer = await childText(first);
    assert.match(answer, /Postgres for .*measure before you commit/);
    const reply = norm(await assistantMessages(page).last().getByTestId("message-text").innerText());
    assert.match(reply, /Summary: 3 sub-agents worked in parallel/);
    assert.equal(await assistantMessages(page).count(), 1, "the children's messages are not the parent's");

    // What the service stored: every call answered with its child's answer, and where the child lives.
    const calls = await storedCalls(ctx, threadId);
    assert.equal(calls.length, 3);
    for (const c of calls) {
      assert.ok(c.subagent?.thread_id, `a child thread on ${c.toolCallId}`);
      assert.notEqual(c.isError, true);
    }
    const child = await ctx.snapshot(calls[0].subagent.thread_id);
    assert.equal(norm(child.messages.at(-1).content.map((p) => p.text ?? "").join("")).replace(/\*/g, ""), answer.replace(/\*/g, ""));
    // The child threads are not in the thread list.
    const list = await ctx.service("/threads?limit=100");
    const listed = list.body.threads.map((t) => t.thread_id);
    assert.ok(listed.includes(threadId), "the parent is listed");
    for (const c of calls) assert.ok(!listed.includes(c.subagent.thread_id), `child ${c.subagent.thread_id} not listed`);
    await keepScreenshot(page, phone ? "subagents-done-phone" : "subagents-done");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, finished sub-agent cards");
  }, SLOW);

  test("a reload mid-run: the cards rejoin, an opened one shows its child live, all end succeeded", async ({ page, ctx }) => {
    const threadId = await startThree(page, ctx);
    await poll(async () => (await stateOf(card(page, "SQLite"))) === "running", { message: "SQLite running" });
    await page.reload();
    await poll(async () => (await cards(page).count()) === 3, { message: "three cards after the reload" });
    const c = card(page, "SQLite");
    // Opened from the keyboard.
    await toggle(c).focus();
    await page.keyboard.press("Enter");
    assert.equal(await toggle(c).getAttribute("aria-expanded"), "true");
    await poll(async () => (await childText(c)).length > 0, { message: "the child's conversation after the reload" });
    assert.match(norm(await c.getByTestId("subagent-user").innerText()), /Look into SQLite/);
    // Still streaming: the rejoined run's events reach the opened card.
    assert.equal(await stateOf(c), "running", "opened while its child still runs");
    const before = await childText(c);
    await poll(async () => (await childText(c)).length > before.length, { message: "the child's text grows after the reload" });
    for (const t of TITLES) await poll(async () => (await stateOf(card(page, t))) === "succeeded", { message: `${t} succeeded after the reload` });
    await waitIdle(page, IDLE);
    assert.match(await childText(c), /SQLite for .*measure before you commit/);
    assert.match(norm(await assistantMessages(page).last().getByTestId("message-text").innerText()), /Summary: 3 sub-agents/);

    // A finished turn reloaded: a card opened loads its child's thread.
    await page.reload();
    const again = card(page, "an embedded key-value store");
    await again.waitFor();
    assert.equal(await stateOf(again), "succeeded");
    await toggle(again).click();
    await poll(async () => /an embedded key-value store for/.test(await childText(again)), { message: "the child loaded when opened" });
    const calls = await storedCalls(ctx, threadId);
    assert.equal(calls.filter((x) => x.result !== undefined && x.isError !== true).length, 3);
  }, SLOW);

  onBothViewports(test, "Stop stops every sub-agent: the cards say cancelled", async ({ page, ctx }) => {
    const threadId = await startThree(page, ctx);
    await poll(async () => (await stateOf(card(page, "Postgres"))) === "running", { message: "running" });
    await toggle(card(page, "Postgres")).click();
    await poll(async () => (await childText(card(page, "Postgres"))).length > 0, { message: "words before the Stop" });
    await stopButton(page).click();
    await waitIdle(page, IDLE);
    for (const t of TITLES) {
      await poll(async () => (await stateOf(card(page, t))) === "cancelled", { message: `${t} cancelled` });
      assert.equal(norm(await card(page, t).getByTestId("subagent-state").innerText()), "cancelled");
    }
    // The children's threads say so too.
    for (const c of await storedCalls(ctx, threadId)) {
      if (!c.subagent) continue;
      const last = (await ctx.snapshot(c.subagent.thread_id)).messages.at(-1);
      assert.equal(last.role === "assistant" ? last.status?.type : "incomplete", "incomplete", `child ${c.subagent.thread_id} ended`);
    }
    assert.deepEqual(await seriousViolations(page), [], "axe-core, cancelled sub-agent cards");
  });

  onBothViewports(test, "a sub-agent opens as a thread that says where it came from, and goes back", async ({ page, ctx, phone }) => {
    const threadId = await startThree(page, ctx);
    for (const t of TITLES) await poll(async () => (await stateOf(card(page, t))) === "succeeded", { message: `${t} succeeded` });
    await waitIdle(page, IDLE);
    const calls = await storedCalls(ctx, threadId);
    const childId = calls[1].subagent.thread_id;
    await card(page, "SQLite").getByRole("link", { name: "Open as a thread" }).click();
    await page.waitForURL(`**/chat/${childId}`);
    const origin = page.getByTestId("subagent-origin");
    await origin.waitFor();
    assert.match(norm(await origin.innerText()), /^Sub-agent of /);
    await poll(async () => (await assistantMessages(page).count()) === 1, { message: "the child's reply" });
    assert.match(norm(await assistantMessages(page).last().getByTestId("message-text").innerText()), /SQLite for/);
    await keepScreenshot(page, phone ? "subagent-thread-phone" : "subagent-thread");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a sub-agent's thread");
    await origin.getByRole("link").click();
    await page.waitForURL(`**/chat/${threadId}`);
    await poll(async () => (await cards(page).count()) === 3, { message: "back at the parent's cards" });
  }, SLOW);
}, { serviceEnv: { THREADLINE_BUILTIN_DELAY: "150ms" } });
