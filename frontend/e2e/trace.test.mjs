// A reply's trace in the app (GET …/runs/{run_id}/trace): the demo model's
// agent turn with three parallel tool calls (calculator, a clock with an
// unknown time zone, which fails, and a one-second wait), opened from the
// reply's Trace action as a timeline: the run, two model calls with their
// tokens and the run's total, the three calls side by side in time, the
// failure in words and colour; keyboard only, and axe-clean.

import assert from "node:assert/strict";
import { browserSuite, keepScreenshot } from "./harness.mjs";
import { assistantMessages, openNewChat, send, seriousViolations, waitIdle } from "./helpers.mjs";

const box = async (loc) => {
  const b = await loc.boundingBox();
  assert.ok(b, "a visible bar");
  return b;
};

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  test("the trace of an agent turn: parallel calls overlap, the failed one is marked", async ({ page, ctx }) => {
    await openNewChat(page, ctx);
    await page.evaluate(() => window.localStorage.setItem("threadline:model", "builtin:demo"));
    await send(page, "what is 12*7, what time is it in Mars/Phobos, and wait 1 second");
    await waitIdle(page);
    const reply = assistantMessages(page).last();
    const button = reply.getByRole("button", { name: "Trace" });
    await button.waitFor();

    // Keyboard only: focus the button, Enter opens the dialog.
    await button.focus();
    const traceResp = page.waitForResponse((r) => /\/runs\/[^/]+\/trace$/.test(new URL(r.url()).pathname));
    await page.keyboard.press("Enter");
    const trace = await (await traceResp).json();
    const dialog = page.getByRole("dialog", { name: "Trace of this reply" });
    await dialog.waitFor();
    const rows = dialog.getByTestId("trace-row");
    await rows.first().waitFor();
    assert.deepEqual(
      await rows.evaluateAll((els) => els.map((e) => `${e.dataset.operation}:${e.dataset.status}`)),
      ["invoke_agent:ok", "chat:ok", "execute_tool:ok", "execute_tool:error", "execute_tool:ok", "chat:ok"],
    );
    const names = await rows.locator(".trace-name").allInnerTexts();
    assert.deepEqual(names.slice(2, 5), ["execute_tool calculator", "execute_tool clock", "execute_tool wait"]);

    // The failure in words and in colour.
    const clock = rows.nth(3);
    assert.match(await clock.locator(".trace-status").innerText(), /^failed: .+/);
    const colours = await clock.evaluate((el) => ({
      status: getComputedStyle(el.querySelector(".trace-status")).color,
      bar: getComputedStyle(el.querySelector(".trace-bar")).backgroundColor,
      okBar: getComputedStyle(el.previousElementSibling.querySelector(".trace-bar")).backgroundColor,
    }));
    assert.notEqual(colours.bar, colours.okBar, "the failed call's bar has its own colour");
    assert.equal(colours.status, colours.bar, "its status words are in the same colour");

    // Parallel calls: rows of their own whose bars start together; the
    // wait's bar is the longest and the second step starts after it.
    const [calc, clk, wait, step2] = await Promise.all([2, 3, 4, 5].map((i) => box(rows.nth(i).getByTestId("trace-bar"))));
    assert.ok(Math.abs(calc.x - wait.x) < 2 && Math.abs(clk.x - wait.x) < 2, `bars start together: ${calc.x} ${clk.x} ${wait.x}`);
    assert.ok(calc.y < clk.y && clk.y < wait.y, "one row each");
    assert.ok(wait.width > calc.width * 5, `the wait is the long one: ${wait.width} against ${calc.width}`);
    assert.ok(step2.x >= wait.x + wait.width - 2, `the answer starts after the wait: ${step2.x} against ${wait.x + wait.width}`);
    assert.match(await dialog.getByTestId("trace-summary").innerText(), /2 model calls · 3 tool calls · 1 failed/);

    // Each model call's tokens (the demo model reports usage per step) and
    // the run's total, as the trace endpoint has them.
    const chats = trace.spans.filter((s) => s.operation === "chat");
    assert.equal(chats.length, 2);
    const fmt = (n) => n.toLocaleString("en-US");
    for (const c of chats) assert.ok(c.input_tokens > 0 && c.output_tokens > 0, `step usage in the trace: ${JSON.stringify(c)}`);
    assert.deepEqual(
      await dialog.getByTestId("trace-tokens").allInnerTexts(),
      chats.map((c) => `tokens ${fmt(c.input_tokens)} in · ${fmt(c.output_tokens)} out (${c.finish_reason})`),
    );
    assert.deepEqual(chats.map((c) => c.finish_reason), ["tool_call", "stop"]);
    const run = trace.spans[0];
    assert.equal(run.input_tokens, chats[0].input_tokens + chats[1].input_tokens, "the run's input is its steps' sum");
    assert.equal(run.output_tokens, chats[0].output_tokens + chats[1].output_tokens, "the run's output is its steps' sum");
    assert.equal(
      await dialog.getByTestId("trace-total-tokens").innerText(),
      ` · tokens ${fmt(run.input_tokens)} in · ${fmt(run.output_tokens)} out`,
    );
    await keepScreenshot(page, "trace-view");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, the trace dialog");

    // Escape closes it and gives the focus back to the button.
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "detached" });
    assert.equal(await button.evaluate((el) => el === document.activeElement), true, "the focus back on Trace");
  });
});
