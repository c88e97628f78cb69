// The branch tree (every branch of a thread in an ARIA tree, opened from the
// toolbar or Ctrl-Shift-B; Enter or a click shows a branch), "Fork into new
// chat", the welcome page's starter prompts, per-chat settings kept in the
// thread's metadata and sent in run_config, and a model without its key
// explained before sending.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { browserSuite, keepScreenshot, onBothViewports } from "./harness.mjs";
import {
  assistantMessages,
  composer,
  norm,
  openNewChat,
  poll,
  send,
  seriousViolations,
  textOf,
  threadIdFromUrl,
  userMessages,
  waitIdle,
} from "./helpers.mjs";

/** A thread with two root branches (an edited first message); the second is shown. */
async function twoBranches(ctx, word) {
  const threadId = randomUUID();
  const first = randomUUID();
  await ctx.runDirect(threadId, { message: { id: first, content: `Tell me about the ${word} plan` }, parent_message_id: null });
  await ctx.runDirect(threadId, { message: { content: "Tell me about lunch instead" }, parent_message_id: null });
  return { threadId, first };
}

/** The focused node's text (its accessible name). */
const focused = (page) => page.evaluate(() => (document.activeElement?.textContent ?? "").replace(/^[▾▸]/, "").replace(/\s+/g, " ").trim());

const DEMO = "builtin:demo";

const nodes = (page) => page.getByTestId("branch-tree").getByRole("treeitem");

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  onBothViewports(test, "a branch can be named, renamed and cleared; the name shows in the picker and the tree and survives a reload", async ({ page, ctx, phone }) => {
    const word = `fig${randomUUID().slice(0, 6)}`;
    const { threadId } = await twoBranches(ctx, word);
    // Chat settings live in the same metadata: naming a branch keeps them.
    const settings = { temperature: 0.5 };
    assert.equal((await ctx.service(`/threads/${threadId}`, {
      method: "PATCH",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ metadata: { chat_settings: settings } }),
    })).status, 200);
    const shown = (await ctx.snapshot(threadId)).messages[0].id;
    const labelsOnServer = async () => (await ctx.service(`/threads/${threadId}`)).body.metadata;
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await poll(async () => norm(await userMessages(page).first().innerText()).includes("lunch"), { message: "the second branch shown" });
    const picker = userMessages(page).first().getByTestId("branch-picker");
    assert.equal(await picker.getAttribute("aria-label"), "Branch 2 of 2");

    // Name it.
    await picker.getByRole("button", { name: "Name this branch" }).click();
    const input = picker.getByLabel("Branch name");
    await input.fill("lunch version");
    await input.press("Enter");
    await poll(async () => (await picker.getByTestId("branch-label").count()) === 1, { message: "the name shown" });
    assert.equal(norm(await picker.getByTestId("branch-label").innerText()), "lunch version");
    assert.equal(await picker.getAttribute("aria-label"), "Branch 2 of 2: lunch version");
    assert.equal(await picker.getAttribute("title"), "Branch 2 of 2: lunch version");
    let meta = await labelsOnServer();
    assert.deepEqual(meta.branch_labels, { [shown]: "lunch version" });
    assert.deepEqual(meta.chat_settings, settings, "the other keys kept");

    // In the tree, on the branch's first message.
    await page.getByTestId("branches-open").click();
    const named = page.getByTestId("branch-tree").getByRole("treeitem", { name: /^You: Tell me about lunch instead/ });
    assert.match(norm(await named.innerText()), /named “lunch version”/);
    assert.equal(await page.getByTestId("branch-tree").getByTestId("branch-name").count(), 1, "only that branch is named");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the tree with a named branch");
    await page.keyboard.press("Escape");
    await page.getByTestId("branch-dialog").waitFor({ state: "hidden" });

    // Rename with the keyboard; Escape leaves it as it was.
    const rename = picker.getByRole("button", { name: "Rename this branch" });
    await rename.focus();
    await page.keyboard.press("Enter");
    await input.waitFor();
    await poll(async () => (await input.inputValue()) === "lunch version", { message: "the editor holds the name" });
    await page.keyboard.type("not this");
    await page.keyboard.press("Escape");
    await input.waitFor({ state: "detached" });
    await poll(async () => page.evaluate(() => document.activeElement?.getAttribute("aria-label") === "Rename this branch"), {
      message: "the focus back on Rename",
    });
    assert.equal(norm(await picker.getByTestId("branch-label").innerText()), "lunch version");
    await page.keyboard.press("Enter");
    await input.fill("lunch only");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the name editor");
    await keepScreenshot(page, phone ? "branch-name-phone" : "branch-name");
    await page.keyboard.press("Enter");
    await poll(async () => norm(await picker.getByTestId("branch-label").innerText()) === "lunch only", { message: "renamed" });

    // A name too long, and a save that fails: said in words, what was typed kept.
    await rename.click();
    await input.fill("x".repeat(81));
    await input.press("Enter");
    assert.match(await picker.getByTestId("branch-name-error").innerText(), /at most 80 characters/);
    const patchRoute = (url) => url.pathname.endsWith(`/threads/${threadId}`);
    await page.route(patchRoute, (route) => (route.request().method() === "PATCH" ? route.abort() : route.continue()));
    await input.fill("lunch, saved later");
    await input.press("Enter");
    await poll(async () => /not saved: Could not reach Threadline/.test(await picker.getByTestId("branch-name-error").innerText()), {
      message: "the failed save said",
    });
    assert.equal(await input.inputValue(), "lunch, saved later");
    await page.unroute(patchRoute);
    await input.press("Enter");
    await poll(async () => norm(await picker.getByTestId("branch-label").innerText()) === "lunch, saved later", { message: "saved on a second try" });

    // Another page (another device) reads it from the thread.
    await page.reload();
    await poll(async () => (await picker.getAttribute("aria-label")) === "Branch 2 of 2: lunch, saved later", { message: "the name after a reload" });

    // Clear.
    await rename.click();
    await picker.getByRole("button", { name: "Clear" }).click();
    await poll(async () => (await picker.getByTestId("branch-label").count()) === 0, { message: "the name cleared" });
    assert.equal(await picker.getAttribute("aria-label"), "Branch 2 of 2");
    meta = await labelsOnServer();
    assert.equal(meta.branch_labels, undefined, "no names left");
    assert.deepEqual(meta.chat_settings, settings, "the other keys kept");
  });

  onBothViewports(test, "the branch tree shows every branch and the shown path; Enter and a click show another", async ({ page, ctx, phone }) => {
    const word = `kiwi${randomUUID().slice(0, 6)}`;
    const { threadId, first } = await twoBranches(ctx, word);
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await poll(async () => norm(await userMessages(page).first().innerText()).includes("lunch"), { message: "the second branch shown" });

    await page.keyboard.press("Control+Shift+B");
    const tree = page.getByTestId("branch-tree");
    await tree.waitFor();
    assert.equal(await nodes(page).count(), 4, "two questions and two replies");
    const roots = tree.locator("[role=treeitem][aria-level='1']");
    assert.equal(await roots.count(), 2, "the fork at the root: two siblings side by side");
    assert.equal(await roots.nth(0).getAttribute("aria-expanded"), "true");
    const onPath = await tree.locator("[data-on-path=true]").evaluateAll((els) => els.map((e) => e.innerText.replace(/^[▾▸]/, "").replace(/\s+/g, " ").trim()));
    assert.equal(onPath.length, 2, "the shown path: a question and its reply");
    assert.match(onPath[0], /^You: Tell me about lunch instead · branch 2 of 2 · on the shown path$/);
    assert.match(onPath[1], /^Assistant: .* · shown$/);
    assert.equal(await tree.locator("[aria-selected=true]").count(), 1, "the head is the selected node");
    // The focus starts on the head.
    await poll(async () => (await focused(page)).endsWith("· shown"), {
      message: "the head has the focus",
    });
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the branch tree");
    await keepScreenshot(page, phone ? "branch-tree-phone" : "branch-tree");

    // Home goes to the first root; Enter shows its branch.
    await page.keyboard.press("Home");
    await poll(async () => new RegExp(`^You: Tell me about the ${word} plan · branch 1 of 2$`).test(await focused(page)), { message: "Home: the first root" });
    await page.keyboard.press("ArrowDown");
    await poll(async () => /^Assistant: /.test(await focused(page)), { message: "ArrowDown: its reply" });
    await page.keyboard.press("ArrowUp");
    await poll(async () => (await focused(page)).startsWith("You: Tell me about the"), { message: "ArrowUp: back to the question" });
    await page.keyboard.press("Enter");
    await page.getByTestId("branch-dialog").waitFor({ state: "hidden" });
    await poll(async () => norm(await userMessages(page).first().innerText()).includes(word), { message: "the first branch shown" });
    assert.equal(norm(await page.getByTestId("branch-count").first().innerText()), "1 / 2");
    await poll(async () => (await ctx.snapshot(threadId)).messages.some((m) => m.id === first), { message: "the head stored" });

    // The button opens it too; a click on a node shows that branch.
    await page.getByTestId("branches-open").click();
    await tree.waitFor();
    assert.equal(await tree.locator("[data-on-path=true]").first().getAttribute("data-node-id"), first, "the path marked moved");
    await tree.getByRole("treeitem", { name: /^You: Tell me about lunch/ }).locator(".branch-row").click();
    await poll(async () => norm(await userMessages(page).first().innerText()).includes("lunch"), { message: "the second branch again" });
    await poll(async () => !(await ctx.snapshot(threadId)).messages.some((m) => m.id === first), { message: "the head stored again" });
  });

  onBothViewports(test, "a regenerate makes a new branch with visibly different text, and the tree shows it", async ({ page, ctx }) => {
    await openNewChat(page, ctx);
    await page.getByLabel("Model", { exact: true }).selectOption(DEMO);
    await send(page, "hello");
    await waitIdle(page);
    const before = norm(await assistantMessages(page).last().innerText());
    await page.getByRole("button", { name: "Regenerate", exact: true }).click();
    await poll(async () => norm(await page.getByTestId("branch-count").last().innerText()) === "2 / 2", { message: "a second reply" });
    await waitIdle(page);
    const after = norm(await assistantMessages(page).last().innerText());
    assert.notEqual(after.slice(0, 60), before.slice(0, 60), "the regenerated reply opens differently");
    await page.getByTestId("branches-open").click();
    const replies = page.getByTestId("branch-tree").getByRole("treeitem", { name: /^Assistant: .* · branch \d of 2/ });
    assert.equal(await replies.count(), 2, "both replies in the tree, as siblings");
  });

  onBothViewports(test, "fork into a new chat copies the path up to the message", async ({ page, ctx }) => {
    const word = `fig${randomUUID().slice(0, 6)}`;
    const { threadId } = await twoBranches(ctx, word);
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await poll(async () => norm(await userMessages(page).first().innerText()).includes("lunch"), { message: "the chat shown" });
    const before = await ctx.snapshot(threadId);
    await userMessages(page).first().hover();
    await userMessages(page).first().getByTestId("fork-chat").click();
    await poll(async () => !page.url().includes(threadId) && /\/chat\/[0-9a-f-]{36}/.test(page.url()), { message: "the new chat opened" });
    const forkId = threadIdFromUrl(page);
    await poll(async () => norm(await userMessages(page).first().innerText()).includes("lunch"), { message: "the copy shown" });
    assert.equal(await assistantMessages(page).count(), 0, "only the path up to the question");
    const snap = await ctx.snapshot(forkId);
    assert.deepEqual(snap.messages.map((m) => [m.role, textOf(m)]), [["user", "Tell me about lunch instead"]]);
    assert.notEqual(snap.messages[0].id, before.messages[0].id, "new ids");
    assert.equal((await ctx.snapshot(threadId)).messageRepository.messages.length, 4, "the source unchanged");
    // The copy is a chat of its own: a reply continues it.
    await send(page, "and dessert?");
    // Read the stored copy, not the composer: right after Enter the
    // composer can still look idle, before the run has started.
    await poll(async () => (await ctx.snapshot(forkId)).messages.length === 3, { message: "the question and its reply stored in the copy" });
    await waitIdle(page);
  });

  onBothViewports(test, "starter prompts send; a model without its key is explained before sending", async ({ page, ctx, phone }) => {
    await page.goto(`${ctx.baseUrl}/welcome`);
    const starters = page.getByTestId("starter");
    await starters.first().waitFor();
    assert.deepEqual((await starters.allInnerTexts()).map(norm), [
      "What is 12*7?",
      "Make a plan to repaint the kitchen",
      "Wait 3 seconds",
      "Ask me a question",
      "Write three files",
      "Research three options in parallel",
    ]);
    const picker = page.getByLabel("Model", { exact: true });
    await poll(async () => (await picker.locator("option").count()) > 1, { message: "the models listed" });
    assert.match(norm(await picker.locator("option[value=needs-key]").innerText()), /not configured: needs an API key/);
    await picker.selectOption("needs-key");
    const note = page.getByTestId("model-not-configured");
    await note.waitFor();
    assert.match(norm(await note.innerText()), /needs-key is not configured.*a reply will fail/);
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the welcome page with starters and the note");
    await keepScreenshot(page, phone ? "welcome-starters-phone" : "welcome-starters");
    await picker.selectOption("markdown");
    await note.waitFor({ state: "detached" });
    // The demo model answers the starter (with the calculator tool).
    const def = DEMO;
    await picker.selectOption(def);
    await starters.filter({ hasText: "What is 12*7?" }).click();
    await page.waitForURL(/\/chat\/[0-9a-f-]{36}/);
    const threadId = threadIdFromUrl(page);
    await poll(async () => norm(await userMessages(page).first().innerText()) === "What is 12*7?", { message: "the starter sent" });
    await waitIdle(page);
    const snap = await ctx.snapshot(threadId);
    assert.equal(textOf(snap.messages[0]), "What is 12*7?");
    assert.ok(snap.messages.some((m) => m.role === "assistant" && textOf(m).includes("84")), `the answer, 84 (model ${def}): ${JSON.stringify(snap.messages.map(textOf))}`);
  });

  onBothViewports(test, "per-chat settings are kept in the thread's metadata and sent in each run's run_config", async ({ page, ctx, phone }) => {
    const threadId = await openNewChat(page, ctx);
    await page.getByTestId("settings-open").click();
    const panel = page.getByRole("dialog", { name: "Chat settings" });
    await panel.waitFor();
    // Whole on the screen, on a phone too.
    const box = await panel.boundingBox();
    const vw = page.viewportSize().width;
    assert.ok(box && box.x >= 0 && box.x + box.width <= vw, `the panel within the ${vw} px screen: ${JSON.stringify(box)}`);
    await panel.getByLabel("System prompt").fill("Answer like a pirate.");
    await panel.getByLabel(/Temperature/).fill("3");
    await panel.getByTestId("settings-save").click();
    await panel.getByRole("alert").filter({ hasText: "Temperature is a number from 0 to 2." }).waitFor();
    await panel.getByLabel(/Temperature/).fill("0.4");
    await panel.getByLabel(/Max steps/).fill("3");
    assert.equal(await panel.getByLabel("Model").locator("option[value=needs-key]").isDisabled(), true, "an unconfigured model cannot be chosen");
    await panel.getByTestId("settings-save").click();
    await panel.getByRole("status").filter({ hasText: "Saved" }).waitFor();
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the settings popover");
    await keepScreenshot(page, phone ? "chat-settings-phone" : "chat-settings");
    const t = await ctx.service(`/threads/${threadId}`);
    assert.deepEqual(t.body.metadata.chat_settings, { system: "Answer like a pirate.", temperature: 0.4, max_steps: 3 });
    await page.keyboard.press("Escape");
    await panel.waitFor({ state: "detached" });

    const bodies = [];
    page.on("request", (r) => {
      if (r.method() === "POST" && r.url().endsWith(`/threads/${threadId}/runs/stream`)) bodies.push(JSON.parse(r.postData() ?? "{}"));
    });
    await send(page, "hello");
    await poll(async () => (await ctx.snapshot(threadId)).messages.length === 2, { message: "the first turn stored" });
    await waitIdle(page);
    // Kept on reload: read back from the thread's metadata.
    await page.reload();
    await composer(page).waitFor();
    // The thread loaded before the next send (one made sooner would start a new root).
    await assistantMessages(page).first().waitFor();
    await poll(async () => norm(await page.getByTestId("settings-open").innerText()) === "Settings (3)", { message: "the settings read back" });
    await send(page, "again");
    await poll(async () => bodies.length === 2, { message: "the second run sent" });
    await poll(async () => (await ctx.snapshot(threadId)).messages.length === 4, { message: "the second turn stored" });
    await waitIdle(page);
    assert.equal(bodies.length, 2, "two runs, before and after the reload");
    for (const b of bodies) {
      assert.equal(b.run_config.system, "Answer like a pirate.");
      assert.equal(b.run_config.temperature, 0.4);
      assert.equal(b.run_config.max_steps, 3);
    }
  });
});
