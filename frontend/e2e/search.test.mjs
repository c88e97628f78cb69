// Search: Ctrl-K or the sidebar's button opens the search; a result opens
// its thread on that message's branch (a branch not shown before),
// scrolled to and highlighted.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { browserSuite } from "./harness.mjs";
import { assistantMessages, norm, poll, seriousViolations, userMessages } from "./helpers.mjs";

/** A thread whose first message was edited: the word is only on the hidden branch. */
async function editedThread(ctx, word) {
  const threadId = randomUUID();
  const first = randomUUID();
  await ctx.runDirect(threadId, { message: { id: first, content: `Tell me about the ${word} migration plan` }, parent_message_id: null });
  await ctx.runDirect(threadId, { message: { content: "Tell me about lunch instead" }, parent_message_id: null });
  const r = await ctx.service(`/threads/${threadId}`, {
    method: "PATCH",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ title: `Search test ${word}` }),
  });
  assert.equal(r.status, 200);
  const snap = await ctx.snapshot(threadId);
  assert.ok(!snap.messages.some((m) => m.id === first), "the word's message is on a branch not shown");
  return { threadId, first };
}

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  test("Ctrl-K, a result opens its branch, scrolled to and highlighted", async ({ page, ctx }) => {
    const word = `zebracorn${randomUUID().slice(0, 6)}`;
    const { threadId, first } = await editedThread(ctx, word);

    await page.goto(`${ctx.baseUrl}/welcome`);
    await page.getByTestId("thread-list").waitFor();
    const dialog = page.getByTestId("search-dialog");
    // The shortcut is the page's once it has hydrated (the list is drawn
    // before): under load a first press can come earlier, so press again.
    await poll(async () => {
      if (!(await dialog.isVisible())) await page.keyboard.press("Control+K");
      return dialog.isVisible();
    }, { interval: 500, message: "Ctrl-K opens the search dialog" });
    const input = page.getByTestId("search-input");
    await poll(async () => await input.evaluate((el) => el === document.activeElement), { message: "the search box has the focus" });
    await input.fill(word.slice(0, 9) + "*");
    const result = page.locator(`[data-testid=search-result][data-message-id="${first}"]`);
    await result.waitFor();
    assert.equal(norm(await result.locator("mark").first().innerText()).toLowerCase(), word.toLowerCase());
    assert.ok(norm(await result.innerText()).includes(`Search test ${word}`), "the result names its thread");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the search dialog with results");

    await result.click();
    await page.waitForURL(`**/chat/${threadId}**`);
    await dialog.waitFor({ state: "hidden" });
    // The branch through the found message, down to its reply, is shown.
    const found = userMessages(page).first();
    await poll(async () => norm(await found.innerText()).includes(word), { message: "the found message is shown" });
    await poll(async () => (await found.getAttribute("data-search-hit")) === first, { message: "the found message highlighted" });
    assert.ok(await found.isVisible(), "scrolled into view");
    assert.equal(await assistantMessages(page).count(), 1, "its reply below it");
    assert.equal(norm(await page.getByTestId("branch-count").first().innerText()), "1 / 2", "the first of two branches");
    await poll(async () => !page.url().includes("?m="), { message: "?m= dropped from the address" });
    await poll(async () => (await ctx.snapshot(threadId)).messages.some((m) => m.id === first), { message: "the branch stored as head" });
    await poll(async () => (await found.getAttribute("data-search-hit")) === null, { message: "the highlight fades", timeout: 10_000 });
    await page.reload();
    await poll(async () => norm(await userMessages(page).first().innerText()).includes(word), { message: "the branch kept on reload" });
  });

  test("the sidebar's button, no results, Escape", async ({ page, ctx }) => {
    await page.goto(`${ctx.baseUrl}/welcome`);
    await page.getByTestId("search-open").click();
    const dialog = page.getByTestId("search-dialog");
    await dialog.waitFor();
    await page.getByTestId("search-input").fill(`nothing${randomUUID().slice(0, 8)}`);
    await poll(async () => norm(await dialog.getByRole("status").innerText()) === "No messages found.", { message: "no results said" });
    assert.deepEqual(await seriousViolations(page), [], "axe-core, an empty search");
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
  });
});
