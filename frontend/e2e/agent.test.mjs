// Agent turns in the app (API.md, "Agent runs"), with the built-in demo model
// (builtin:demo, deterministic and offline): a tool call with its result in
// the reply, a plan as a checklist, a reload during a tool call, regenerate
// of an agent turn, an approval (this suite's service marks `clock` for
// approval) and the app's client tool (ask_user), each continuing the same
// turn.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { browserSuite, keepScreenshot, onBothViewports } from "./harness.mjs";
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

  onBothViewports(test, "a stale question: the person sent something else instead, so the old form says so and is gone", async ({ page, ctx }) => {
    const threadId = await openNewChat(page, ctx);
    await useDemo(page);
    await send(page, "ask me what to do");
    const ask = assistantMessages(page).first().locator("[data-testid=tool-call][data-tool=ask_user]");
    await ask.getByRole("button", { name: "Make a plan" }).waitFor();
    await waitIdle(page);
    await send(page, "never mind, what is 2+2?");
    await poll(async () => (await assistantMessages(page).count()) === 2, { message: "a second reply" });
    await waitIdle(page);
    await ask.getByTestId("stale-turn").waitFor();
    assert.equal(norm(await ask.getByTestId("stale-turn").innerText()), "This question was not answered; the conversation moved on.");
    assert.equal(await ask.getByRole("button").count(), 0, "no buttons left on the stale form");
    assert.equal(await ask.getByRole("textbox").count(), 0, "no answer box on the stale form");
    assert.equal(await ask.getAttribute("data-state"), "interrupted");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a stale question");
    const snap = await ctx.snapshot(threadId);
    assert.equal(snap.messages.length, 4, "question, waiting turn, the other message, its reply");
  });

  onBothViewports(test, "a stale approval: the service moved on elsewhere, Approve is refused in words and the card says so", async ({ page, ctx }) => {
    const threadId = await openNewChat(page, ctx);
    await useDemo(page);
    await send(page, "what time is it?");
    const call = assistantMessages(page).first().locator("[data-testid=tool-call][data-tool=clock]");
    await call.getByRole("button", { name: "Approve" }).waitFor();
    await waitIdle(page);
    // Another tab sends a message below the waiting turn: this page does not know.
    const waiting = (await ctx.snapshot(threadId)).messages.at(-1);
    await ctx.runDirect(threadId, {
      message: { id: randomUUID(), content: "something else" },
      parent_message_id: waiting.id,
      run_config: { model: "builtin:demo" },
    });
    await call.getByRole("button", { name: "Approve" }).click();
    const notice = page.getByTestId("thread-notice");
    await notice.waitFor();
    const said = norm(await notice.innerText());
    assert.match(said, /moved on/, "the refusal in words");
    assert.doesNotMatch(said, /[0-9a-f]{8}-[0-9a-f]{4}-/i, "no raw id in the notice");
    await call.getByTestId("stale-turn").waitFor();
    assert.equal(await call.getByRole("button", { name: "Approve" }).count(), 0, "no Approve left");
    assert.equal(await call.getByText("Approved.").count(), 0, "never says Approved.");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a stale approval");
  });

  onBothViewports(test, "a tool call: calculator's arguments and result inside the one reply that answers", async ({ page, ctx }) => {
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

  onBothViewports(test, "a plan: reasoning collapsed, then a checklist whose tasks tick as they finish", async ({ page, ctx }) => {
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
    // Once: not also as a Markdown checklist in the text beside the card.
    const text = norm(await assistantMessages(page).last().innerText());
    assert.equal(text.split("Break it into small steps").length - 1, 1, `the tasks once in the reply, got ${text}`);
    assert.equal(await assistantMessages(page).last().locator("input[type=checkbox]").count(), 0, "no checkboxes");
    // Its ticks are pictures with words, not controls.
    assert.equal(await plan.getByRole("img", { name: "Done" }).count(), await items.count(), "a Done icon per task");
    assert.equal(await plan.getByRole("checkbox").count(), 0, "nothing to tick by hand");
    // The reasoning says how long it thought.
    assert.match(norm(await reasoning.getByTestId("reasoning-label").innerText()), /^Thought for \d+ s$/);
    assert.equal(await reasoning.locator("summary").getAttribute("aria-expanded"), "true", "opened, and says so");
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

  onBothViewports(test, "a reload during a tool call rejoins it and sees it finish", async ({ page, ctx }) => {
    await openNewChat(page, ctx);
    await useDemo(page);
    await send(page, "please wait 3 seconds");
    const call = toolCall(page, "wait");
    await call.waitFor();
    assert.equal(await call.getAttribute("data-state"), "running");
    // A running call: a closed disclosure that says so, a spinner and the time it has run.
    const summary = call.locator("summary");
    assert.equal(await summary.getAttribute("aria-expanded"), "false");
    assert.equal(await summary.locator(".chevron").count(), 1, "a chevron shows it opens");
    assert.equal(await call.locator(".spinner").count(), 1, "a spinner while it runs");
    await poll(async () => /^[1-9]\d* s$/.test(norm(await call.getByTestId("tool-elapsed").innerText())), {
      message: "the elapsed time counts",
    });
    await summary.click();
    await poll(async () => (await summary.getAttribute("aria-expanded")) === "true", { message: "the call opens" });
    await call.getByText("Arguments").waitFor();
    assert.deepEqual(await seriousViolations(page), [], "axe-core, a running tool call");
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
