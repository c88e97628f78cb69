// Chatting: streaming, branches (regenerate, edit, switch), reload and
// network blips mid-reply, stop, the welcome page's hand-off, errors, Markdown.

import assert from "node:assert/strict";
import { GATED_BEFORE, GATED_FIRST_TOKEN, GATED_REPLY } from "./fake-openai.mjs";
import { browserSuite } from "./harness.mjs";
import {
  norm,
  poll,
  textOf,
  composer,
  stopButton,
  assistantMessages,
  userMessages,
  lastAssistantText,
  send,
  waitIdle,
  openNewChat,
  threadIdFromUrl,
  serverReply,
  chatWithReply,
  editFirstUserMessage,
  sendGated,
} from "./helpers.mjs";

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
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
    await assistantMessages(page).last().getByRole("button", { name: "Regenerate", exact: true }).click();
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

  test("reload in the middle of a reply and see it finish exactly once", async ({ page, ctx, t }) => {
    if (!ctx.releaseGate) return t.skip("needs the harness's fake model");
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

  test("a dropped connection mid-reply rejoins the run without a reload", async ({ page, ctx, t }) => {
    if (!ctx.dropConnections || !ctx.releaseGate) return t.skip("needs the harness's relay and fake model");
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

  test("cancel a reply", async ({ page, ctx, t }) => {
    if (!ctx.releaseGate) return t.skip("needs the harness's fake model");
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

  test("markdown (GFM tables, strikethrough, safe links) and highlighted code blocks, with copy", async ({ page, ctx }) => {
    const threadId = await openNewChat(page, ctx);
    await page.getByLabel("Model", { exact: true }).selectOption("markdown");
    await send(page, "Answer in Markdown");
    const reply = assistantMessages(page).last();
    await reply.locator("pre code").waitFor({ timeout: 20_000 });
    await waitIdle(page);
    assert.equal(norm(await reply.locator("strong").first().innerText()), "bold");
    assert.equal(await reply.locator("li").count(), 2);
    const code = await reply.locator("pre code").innerText();
    assert.ok(code.includes("def greet(name):") && code.includes('return f"hello {name}"'), code);
    assert.equal(norm(await reply.locator(".code-header span").innerText()), "python");
    // Highlighted: Prism's tokens (the keyword "def", the string).
    await poll(async () => (await reply.locator("pre code .token.keyword").count()) > 0, { message: "highlighted code" });
    assert.equal(norm(await reply.locator("pre code .token.keyword").first().innerText()), "def");
    // GFM: a table, strikethrough.
    const table = reply.locator("table");
    assert.deepEqual(await table.locator("th").allInnerTexts(), ["name", "score"]);
    assert.deepEqual((await table.locator("tbody tr").allInnerTexts()).map(norm), ["ada 10", "bob 7"]);
    assert.equal(norm(await reply.locator("del").innerText()), "wrong");
    // A safe link: a new tab, no opener, underlined, not the body colour.
    const link = reply.getByRole("link", { name: "the docs" });
    assert.equal(await link.getAttribute("href"), "https://example.com/docs");
    assert.equal(await link.getAttribute("target"), "_blank");
    assert.match((await link.getAttribute("rel")) ?? "", /noopener/);
    const look = await link.evaluate((a) => {
      const s = getComputedStyle(a);
      return { line: s.textDecorationLine, color: s.color, body: getComputedStyle(a.closest(".markdown")).color };
    });
    assert.match(look.line, /underline/);
    assert.notEqual(look.color, look.body, "links are not in the body colour");
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
    await page.getByLabel("Model", { exact: true }).selectOption("needs-key");
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
  test("a message sent right after a reload, before the thread is in, answers the shown branch", async ({ page, ctx }) => {
    const threadId = await chatWithReply(page, ctx, "First question");
    const firstReply = (await serverReply(ctx, threadId)).message.id;
    // The snapshot comes late: the composer is there before the thread.
    const snapshotRoute = (url) => url.pathname.endsWith(`/threads/${threadId}/messages`);
    let release;
    const released = new Promise((r) => (release = r));
    await page.route(snapshotRoute, async (route) => {
      await released;
      await route.continue();
    });
    await page.reload();
    await composer(page).waitFor();
    await send(page, "Second question");
    release();
    await poll(async () => (await userMessages(page).count()) === 2, { message: "both questions shown" });
    await waitIdle(page);
    await page.unroute(snapshotRoute);
    const snap = await ctx.snapshot(threadId);
    const texts = snap.messages.map((m) => `${m.role}:${norm(textOf(m))}`.slice(0, 40));
    assert.equal(snap.messages.length, 4, `one branch of two turns, got ${JSON.stringify(texts)}`);
    assert.equal(norm(textOf(snap.messages[2])), "Second question");
    assert.equal(snap.messages[1].id, firstReply, "the second question answers the first reply");
  });

  test("a message sent after a reload during an outage fails at once in its own words; the thread comes back", async ({ page, ctx, t }) => {
    if (!ctx.refuseService) return t.skip("needs the harness's relay");
    const threadId = await chatWithReply(page, ctx, "First question");
    const firstReply = (await serverReply(ctx, threadId)).message.id;
    const notice = page.getByTestId("thread-notice");
    ctx.refuseService(true);
    try {
      await page.reload();
      // The load failed already: the send does not wait for the next attempt.
      await poll(async () => norm(await notice.innerText()).includes("Can't reach the Threadline service"), {
        message: "the outage said",
      });
      await send(page, "Second question");
      await poll(async () => /bad_gateway|network_error/.test(await notice.innerText()), {
        message: "the send's own notice",
        timeout: 10_000,
      });
      assert.match(await notice.innerText(), /not answering|could not reach/i);
      await poll(async () => (await composer(page).inputValue()) === "Second question", { message: "the draft kept" });
    } finally {
      ctx.refuseService(false);
    }
    // The thread comes back by itself; the send's notice and its Retry stay.
    await assistantMessages(page).first().waitFor({ timeout: 30_000 });
    assert.match(await notice.innerText(), /not answering|could not reach/i);
    await notice.getByRole("button", { name: "Retry" }).click();
    await poll(async () => (await userMessages(page).count()) === 2, { message: "the second question shown" });
    await waitIdle(page);
    const snap = await ctx.snapshot(threadId);
    assert.equal(snap.messages.length, 4, "one branch of two turns");
    assert.equal(norm(textOf(snap.messages[2])), "Second question");
    assert.equal(snap.messages[1].id, firstReply, "the second question answers the first reply");
  });
});
