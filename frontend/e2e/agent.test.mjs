// Agent turns in the app (API.md, "Agent runs"), with the built-in demo model
// (builtin:demo, deterministic and offline): a tool call with its result in
// the reply, a plan as a checklist, a reload during a tool call, regenerate
// of an agent turn, an approval (this suite's service marks `clock` for
// approval) and the app's client tool (ask_user), each continuing the same
// turn.

import assert from "node:assert/strict";
import { browserSuite, keepScreenshot } from "./harness.mjs";
import { assistantMessages, norm, openNewChat, poll, send, seriousViolations, waitIdle } from "./helpers.mjs";

const DEMO = "builtin:demo";

/** Picks the demo model for this browser's runs (the picker's own storage). */
async function useDemo(page) {
  await page.evaluate((m) => window.localStorage.setItem("threadline:model", m), DEMO);
}

const toolCall = (page, tool) => assistantMessages(page).last().locator(`[data-testid=tool-call][data-tool=${tool}]`);

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  test("an approval: the turn waits, survives a reload, and Approve continues it", async ({ page, ctx }) => {
    const threadId = await openNewChat(page, ctx);
    await useDemo(page);
    await send(page, "what time is it?");
    const call = toolCall(page, "clock");
    await call.waitFor();
    await poll(async () => (await call.getAttribute("data-state")) === "waiting", { message: "the call waits" });
    await waitIdle(page);
    const snap = await ctx.snapshot(threadId);
    assert.deepEqual(snap.messages.at(-1).status, { type: "requires-action", reason: "tool-calls" });
    await keepScreenshot(page, "agent-approval");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a turn waiting for an approval");

    // A reload shows the turn still waiting, with its buttons.
    await page.reload();
    const again = toolCall(page, "clock");
    await again.getByRole("button", { name: "Approve" }).click();
    await poll(async () => (await again.getAttribute("data-state")) === "done", { message: "the clock answered" });
    await waitIdle(page);
    assert.equal(await assistantMessages(page).count(), 1, "the same turn, one assistant message");
    assert.match(norm(await assistantMessages(page).last().innerText()), /It is \*{0,2}\d\d:\d\d/);
    const after = await ctx.snapshot(threadId);
    const turn = after.messages.at(-1);
    assert.equal(turn.id, snap.messages.at(-1).id, "the continuation streamed into the same message");
    assert.equal(turn.status.type, "complete");
  });

  test("a rejected approval answers the call as an error and the model goes on", async ({ page, ctx }) => {
    await openNewChat(page, ctx);
    await useDemo(page);
    await send(page, "what time is it?");
    const call = toolCall(page, "clock");
    await call.getByRole("button", { name: "Reject" }).click();
    await poll(async () => (await call.getAttribute("data-state")) === "error", { message: "the call rejected" });
    await waitIdle(page);
    assert.match(norm(await assistantMessages(page).last().innerText()), /could not do it/);
  });

  test("the app's client tool: the model asks, the person answers in a form, the turn goes on", async ({ page, ctx }) => {
    const threadId = await openNewChat(page, ctx);
    await useDemo(page);
    await send(page, "ask me what to do");
    const ask = toolCall(page, "ask_user");
    await ask.getByText("Which should I do first?").waitFor();
    await waitIdle(page);
    await keepScreenshot(page, "agent-client-tool");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a client tool's form");
    await ask.getByRole("button", { name: "Make a plan" }).click();
    await poll(async () => /You answered: Make a plan/.test(norm(await assistantMessages(page).last().innerText())), {
      message: "the answer in the reply",
    });
    await waitIdle(page);
    const turn = (await ctx.snapshot(threadId)).messages.at(-1);
    const part = turn.content.find((p) => p.type === "tool-call" && p.toolName === "ask_user");
    assert.equal(part?.result, "Make a plan");
    assert.equal(turn.status.type, "complete");
  });

  test("a tool call: calculator's arguments and result inside the one reply that answers", async ({ page, ctx }) => {
    const threadId = await openNewChat(page, ctx);
    await useDemo(page);
    await send(page, "what is 12*7?");
    const call = toolCall(page, "calculator");
    await call.waitFor();
    await poll(async () => (await call.getAttribute("data-state")) === "done", { message: "the call answered" });
    await waitIdle(page);
    assert.equal(await assistantMessages(page).count(), 1, "one assistant message for the whole turn");
    await call.locator("summary").click();
    assert.match(norm(await call.locator(".tool-args").innerText()), /"expression"\s*:\s*"12\*7"/);
    assert.equal(norm(await call.getByTestId("tool-result").innerText()), "84");
    assert.match(norm(await assistantMessages(page).last().innerText()), /84/);
    await keepScreenshot(page, "agent-tool-call");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, an open tool call");

    // The stored turn is the same after a reload.
    const snap = await ctx.snapshot(threadId);
    const parts = snap.messages.at(-1).content;
    const stored = parts.find((p) => p.type === "tool-call");
    assert.ok(stored, `a stored tool-call part, got ${JSON.stringify(parts)}`);
    assert.equal(stored.result, 84);
    await page.reload();
    await toolCall(page, "calculator").waitFor();
    assert.equal(await toolCall(page, "calculator").getAttribute("data-state"), "done");
  });

  test("a plan: reasoning collapsed, then a checklist whose tasks tick as they finish", async ({ page, ctx }) => {
    await openNewChat(page, ctx);
    await useDemo(page);
    await send(page, "make a plan to repaint the kitchen");
    const plan = assistantMessages(page).last().getByTestId("plan");
    await plan.waitFor();
    await waitIdle(page);
    // Its reasoning comes first, collapsed.
    const reasoning = assistantMessages(page).last().getByTestId("reasoning");
    assert.equal(await reasoning.getAttribute("open"), null, "reasoning collapsed by default");
    assert.equal(await reasoning.getByText("split it into four tasks").isVisible(), false);
    await reasoning.locator("summary").click();
    await reasoning.getByText("split it into four tasks").waitFor();
    const items = plan.locator("li");
    assert.ok((await items.count()) >= 2, `tasks in the plan, got ${await items.count()}`);
    assert.equal(await plan.locator("li[data-done=false]").count(), 0, "every task ticked at the end");
    assert.equal(await assistantMessages(page).last().getByTestId("plan").count(), 1, "the plan shown once");
    await keepScreenshot(page, "agent-plan");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a plan");
  });

  test("the files a turn produced, as a list of links that save them", async ({ page, ctx }) => {
    await openNewChat(page, ctx);
    await useDemo(page);
    await send(page, "write me some files");
    const files = assistantMessages(page).last().getByTestId("files");
    await files.waitFor();
    await waitIdle(page);
    const links = files.getByRole("link");
    assert.equal(await links.count(), 2);
    assert.equal(norm(await links.first().innerText()), "notes.md");
    assert.equal(await links.first().getAttribute("download"), "notes.md");
    const download = page.waitForEvent("download");
    await links.first().click();
    const saved = await download;
    assert.equal(saved.suggestedFilename(), "notes.md");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a file list");
  });

  test("a reload during a tool call rejoins it and sees it finish", async ({ page, ctx }) => {
    await openNewChat(page, ctx);
    await useDemo(page);
    await send(page, "please wait 3 seconds");
    const call = toolCall(page, "wait");
    await call.waitFor();
    assert.equal(await call.getAttribute("data-state"), "running");
    await page.reload();
    const again = toolCall(page, "wait");
    await again.waitFor();
    await poll(async () => (await again.getAttribute("data-state")) === "done", { message: "the wait answered after the reload" });
    await waitIdle(page);
  });

  test("regenerate an agent turn: two sibling turns and the branch picker", async ({ page, ctx }) => {
    const threadId = await openNewChat(page, ctx);
    await useDemo(page);
    await send(page, "what is 6*7?");
    await poll(async () => (await toolCall(page, "calculator").getAttribute("data-state")) === "done", { message: "the first turn" });
    await waitIdle(page);
    const reply = assistantMessages(page).last();
    await reply.getByRole("button", { name: "Regenerate" }).click();
    const count = reply.getByTestId("branch-count");
    await poll(async () => norm(await count.innerText()) === "2 / 2", { message: "2 / 2 on the reply" });
    await waitIdle(page);
    await poll(async () => (await toolCall(page, "calculator").getAttribute("data-state")) === "done", { message: "the second turn's call" });
    const snap = await ctx.snapshot(threadId);
    const user = snap.messages[0].id;
    const turns = snap.messageRepository.messages.filter((m) => m.parentId === user);
    assert.equal(turns.length, 2, "two sibling turns under the question");
    for (const t of turns) {
      assert.ok(t.message.content.some((p) => p.type === "tool-call" && p.result === 42), "each turn has its answered call");
    }
  });
}, { serviceEnv: { THREADLINE_TOOL_APPROVAL: "clock" } });
