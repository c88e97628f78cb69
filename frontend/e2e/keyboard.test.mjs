// The keyboard (issue 30, item 8) and the collapsible desktop sidebar
// (item 9): a skip link as the first tab stop, the shortcuts and their help
// dialog ("?" and a button), the thread list as one tab stop, the focus kept
// on the branch picker after a switch and given back to Edit after Escape.
// Each runs on desktop and phone where it applies.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { browserSuite, keepScreenshot, onBothViewports } from "./harness.mjs";
import {
  assistantMessages,
  chatWithReply,
  composer,
  norm,
  poll,
  seriousViolations,
  userMessages,
  waitIdle,
} from "./helpers.mjs";

const focusedIs = (loc) => loc.evaluate((el) => el === document.activeElement);
const focusedText = (page) => page.evaluate(() => (document.activeElement?.getAttribute("aria-label") || document.activeElement?.textContent || "").trim());

/**
 * Moves the focus to the top of the page (the composer has autofocus), so
 * that the next Tab goes to the first tab stop and single keys do not type.
 */
async function focusTop(page) {
  await page.evaluate(() => {
    document.body.tabIndex = -1;
    document.body.focus();
    document.body.removeAttribute("tabindex");
  });
}

/** A thread with one finished exchange, made through the service. */
async function threadWithReply(ctx, text) {
  const id = randomUUID();
  await ctx.runDirect(id, { message: { content: text }, parent_message_id: null });
  return id;
}

/** Opens the sidebar on a phone (the drawer); nothing on desktop. */
async function showSidebar(page, phone) {
  if (!phone) return;
  await page.getByRole("button", { name: "Open the thread list" }).click();
  await page.getByRole("navigation", { name: "Threads" }).waitFor({ state: "visible" });
}

/** A chat whose reply was regenerated once: 2 / 2 on the reply. */
async function chatWithTwoReplies(page, ctx) {
  const threadId = await chatWithReply(page, ctx, "Branch me");
  const reply = assistantMessages(page).last();
  await reply.getByRole("button", { name: "Regenerate", exact: true }).click();
  const count = reply.getByTestId("branch-count");
  await poll(async () => norm(await count.innerText()) === "2 / 2", { message: "2 / 2 on the reply" });
  await waitIdle(page);
  return { threadId, count };
}

browserSuite(import.meta.filename, (test) => {
  onBothViewports(test, "the skip link is the first tab stop and moves to the conversation", async ({ page, ctx }) => {
    const threadId = await threadWithReply(ctx, "Skip over the list");
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await assistantMessages(page).first().waitFor();
    await focusTop(page);
    await page.keyboard.press("Tab");
    const skip = page.getByRole("link", { name: "Skip to conversation" });
    assert.ok(await focusedIs(skip), `the first tab stop is the skip link, got "${await focusedText(page)}"`);
    const box = await skip.boundingBox();
    assert.ok(box && box.y >= 0 && box.height >= 24, `visible while focused: ${JSON.stringify(box)}`);
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the skip link shown");
    await page.keyboard.press("Enter");
    await poll(() => page.evaluate(() => document.activeElement?.id === "conversation"), { message: "the focus on the conversation" });
    await page.keyboard.press("Tab");
    assert.ok(
      await page.evaluate(() => !!document.activeElement?.closest("#conversation")),
      `the next tab stop is in the conversation, got "${await focusedText(page)}"`,
    );
  });

  onBothViewports(test, "the shortcuts help opens with ? and its button, lists every shortcut, closes with Escape", async ({ page, ctx, phone }) => {
    const threadId = await threadWithReply(ctx, "Shortcuts please");
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await assistantMessages(page).first().waitFor();
    const dialog = page.getByTestId("shortcuts-dialog");
    // "?" while typing types.
    await composer(page).fill("Why");
    await composer(page).press("Shift+?");
    assert.equal(await composer(page).inputValue(), "Why?", "? typed into the message");
    assert.equal(await dialog.isVisible(), false, "no help while typing");
    await composer(page).fill("");
    await focusTop(page);
    await page.keyboard.press("Shift+?");
    await dialog.waitFor({ state: "visible" });
    const list = norm(await dialog.getByTestId("shortcut-list").innerText());
    for (const what of [
      "Show these shortcuts",
      "New chat",
      "Search conversations",
      "Focus the message box",
      "Previous branch",
      "Next branch",
      "Show the branch tree",
      "Collapse or expand the thread list",
    ]) {
      assert.ok(list.includes(what), `"${what}" listed: ${list}`);
    }
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the shortcuts dialog");
    await keepScreenshot(page, phone ? "shortcuts-phone" : "shortcuts");
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    // The visible button opens it too (in the drawer on a phone) and gets the focus back.
    await showSidebar(page, phone);
    const button = page.getByTestId("shortcuts-open");
    await button.click();
    await dialog.waitFor({ state: "visible" });
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    await poll(() => focusedIs(button), { message: "the focus back on the button" });
  });

  test("the shortcuts do what they say: focus the message box, new chat", async ({ page, ctx }) => {
    const threadId = await threadWithReply(ctx, "Do the shortcuts work");
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await assistantMessages(page).first().waitFor();
    await focusTop(page);
    await page.keyboard.press("/");
    await poll(() => focusedIs(composer(page)), { message: "/ focuses the message box" });
    assert.equal(await composer(page).inputValue(), "", "the / was not typed");
    await page.keyboard.press("ControlOrMeta+Shift+O");
    await page.waitForURL("**/welcome");
  });

  onBothViewports(test, "a branch switch keeps the focus on the branch picker; [ and ] switch too", async ({ page, ctx }) => {
    const { count } = await chatWithTwoReplies(page, ctx);
    const reply = assistantMessages(page).last();
    const previous = reply.getByRole("button", { name: "Previous branch" });
    await previous.focus();
    await page.keyboard.press("Enter");
    await poll(async () => norm(await count.innerText()) === "1 / 2", { message: "1 / 2" });
    // At the first branch Previous is disabled: the focus is on Next, in the same picker.
    const next = reply.getByRole("button", { name: "Next branch" });
    await poll(() => focusedIs(next), { message: `the focus on the picker's Next, got "${await focusedText(page)}"` });
    await page.keyboard.press("Enter");
    await poll(async () => norm(await count.innerText()) === "2 / 2", { message: "2 / 2 again" });
    await poll(() => focusedIs(previous), { message: "the focus on the picker's Previous" });
    // The shortcuts, from outside any field: the last picker's message.
    await focusTop(page);
    await page.keyboard.press("[");
    await poll(async () => norm(await count.innerText()) === "1 / 2", { message: "[ shows the previous branch" });
    await page.keyboard.press("]");
    await poll(async () => norm(await count.innerText()) === "2 / 2", { message: "] shows the next branch" });
  });

  onBothViewports(test, "Escape closes an edit and gives the focus back to its Edit button", async ({ page, ctx }) => {
    await chatWithReply(page, ctx, "Edit me later");
    const edit = userMessages(page).first().getByRole("button", { name: "Edit" });
    await edit.focus();
    await page.keyboard.press("Enter");
    const editor = page.getByLabel("Edit message");
    await editor.waitFor();
    await poll(() => focusedIs(editor), { message: "the editor focused" });
    await page.keyboard.press("Escape");
    await editor.waitFor({ state: "hidden" });
    await poll(() => focusedIs(userMessages(page).first().getByRole("button", { name: "Edit" })), {
      message: `the focus back on Edit, got "${await focusedText(page)}"`,
    });
    // Cancel does the same.
    await userMessages(page).first().getByRole("button", { name: "Edit" }).click();
    await editor.waitFor();
    await page.getByRole("button", { name: "Cancel edit" }).click();
    await editor.waitFor({ state: "hidden" });
    await poll(() => focusedIs(userMessages(page).first().getByRole("button", { name: "Edit" })), { message: "the focus back on Edit after Cancel" });
  });

  onBothViewports(test, "the thread list is one tab stop: arrows move, Enter opens, F2 renames", async ({ page, ctx, phone }) => {
    const ids = [];
    for (const word of ["alpha", "beta", "gamma"]) ids.push(await threadWithReply(ctx, `Roving ${word} ${randomUUID().slice(0, 6)}`));
    await page.goto(`${ctx.baseUrl}/welcome`);
    await composer(page).waitFor();
    await showSidebar(page, phone);
    const list = page.getByTestId("thread-list");
    for (const id of ids) await list.locator(`[data-thread-id="${id}"]`).waitFor();
    const tabbable = await list.evaluate(
      (el) => Array.from(el.querySelectorAll("a, button, input")).filter((x) => x.tabIndex >= 0).length,
    );
    assert.equal(tabbable, 1, "one tab stop in the thread list");
    // Tab from the top reaches the list once, then leaves it.
    await focusTop(page);
    const inList = [];
    for (let i = 0; i < 40; i++) {
      await page.keyboard.press("Tab");
      const id = await page.evaluate(() => document.activeElement?.closest("[data-testid=thread-list]") ? document.activeElement.closest("[data-thread-id]")?.dataset.threadId ?? "?" : null);
      if (id) inList.push(id);
      if (await page.evaluate(() => document.activeElement?.getAttribute("data-testid") === "shortcuts-open")) break;
    }
    assert.equal(inList.length, 1, `Tab stops in the list: ${inList.join(", ")}`);
    // The newest thread is first; arrows move down and up.
    const link = (id) => list.locator(`[data-thread-id="${id}"] a`);
    await link(ids[2]).focus();
    await page.keyboard.press("ArrowDown");
    await poll(() => focusedIs(link(ids[1])), { message: "ArrowDown: the next thread" });
    assert.equal(await link(ids[1]).getAttribute("tabindex"), "0", "the tab stop moved with the focus");
    assert.equal(await link(ids[2]).getAttribute("tabindex"), "-1");
    await page.keyboard.press("ArrowUp");
    await poll(() => focusedIs(link(ids[2])), { message: "ArrowUp: back" });
    await page.keyboard.press("ArrowDown");
    await poll(() => focusedIs(link(ids[1])), { message: "ArrowDown again" });
    // Right reaches the thread's own buttons.
    await page.keyboard.press("ArrowRight");
    await poll(() => focusedIs(list.locator(`[data-thread-id="${ids[1]}"]`).getByRole("button", { name: "Rename" })), {
      message: "ArrowRight: Rename",
    });
    await page.keyboard.press("ArrowLeft");
    await poll(() => focusedIs(link(ids[1])), { message: "ArrowLeft: the link" });
    await page.keyboard.press("F2");
    const rename = list.getByLabel("Thread title");
    await rename.waitFor();
    await page.keyboard.press("Escape");
    await rename.waitFor({ state: "hidden" });
    await link(ids[1]).focus();
    await page.keyboard.press("Enter");
    await page.waitForURL(`**/chat/${ids[1]}`);
    await userMessages(page).first().waitFor();
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the thread opened from the list");
  });

  test("the desktop sidebar collapses and expands (button and shortcut), remembered across a reload", async ({ page, ctx }) => {
    const threadId = await threadWithReply(ctx, "Collapse the list");
    await page.goto(`${ctx.baseUrl}/chat/${threadId}`);
    await assistantMessages(page).first().waitFor();
    const toggle = page.getByRole("button", { name: "Thread list" });
    const sidebar = page.getByRole("navigation", { name: "Threads" });
    assert.equal(await toggle.getAttribute("aria-expanded"), "true");
    await sidebar.waitFor({ state: "visible" });
    const wideBefore = await page.locator("main").evaluate((el) => el.getBoundingClientRect().width);
    await toggle.click();
    await sidebar.waitFor({ state: "hidden" });
    assert.equal(await toggle.getAttribute("aria-expanded"), "false");
    const wideAfter = await page.locator("main").evaluate((el) => el.getBoundingClientRect().width);
    assert.ok(wideAfter > wideBefore + 150, `the conversation takes the room: ${wideBefore} → ${wideAfter}`);
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the sidebar collapsed");
    await keepScreenshot(page, "sidebar-collapsed");
    await page.reload();
    await assistantMessages(page).first().waitFor();
    assert.equal(await page.getByRole("button", { name: "Thread list" }).getAttribute("aria-expanded"), "false", "still collapsed after a reload");
    assert.equal(await sidebar.isVisible(), false);
    await focusTop(page);
    await page.keyboard.press("ControlOrMeta+Shift+S");
    await sidebar.waitFor({ state: "visible" });
    assert.equal(await toggle.getAttribute("aria-expanded"), "true");
    await page.reload();
    await sidebar.waitFor({ state: "visible" });
    assert.equal(await page.evaluate(() => localStorage.getItem("threadline:sidebar")), null);
  });

  test("phone: the desktop collapse button is not shown; the drawer's menu button is", async ({ page, ctx }) => {
    await page.goto(`${ctx.baseUrl}/welcome`);
    await composer(page).waitFor();
    assert.equal(await page.getByTestId("sidebar-toggle").isVisible(), false);
    await page.getByRole("button", { name: "Open the thread list" }).waitFor({ state: "visible" });
  }, { viewport: { width: 390, height: 844 }, isMobile: true });
});
