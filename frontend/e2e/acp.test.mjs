// An external agent's turn in the app, over ACP (API.md, "ACP agents"):
// the service runs the ACP Go SDK's own example agent (built from the
// module cache by stack.mjs) as the model acp:example. Picked in the model
// picker, it streams its text and a tool call, asks a permission for an
// edit (the turn waits: requires_action), and the card shows the agent's
// own options by name ("Allow this change", "Skip this change"), keyboard
// reachable; the one chosen goes back to the agent as that option
// (approvals[].option_id); the agent ends its turn accordingly. The
// continuation's trace shows the approved call inside the agent's one step.

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { browserSuite, keepScreenshot } from "./harness.mjs";
import { assistantMessages, norm, openNewChat, poll, send, seriousViolations, waitIdle } from "./helpers.mjs";
import { acpAgentBin, buildAcpAgent } from "./stack.mjs";

if (!existsSync(acpAgentBin) && !(process.env.E2E_BASE_URL && process.env.E2E_SERVICE_URL)) buildAcpAgent();
const dir = mkdtempSync(join(tmpdir(), "threadline-e2e-acp-"));
const config = join(dir, "acp.json");
writeFileSync(config, JSON.stringify({ agents: { example: { command: acpAgentBin, cwd: dir, timeout: "30s" } } }));

const MODEL = "acp:example";
const replyText = async (page) => norm(await assistantMessages(page).last().getByTestId("message-text").innerText());

/** Picks the agent in the composer's model picker, as a person does. */
async function pickAgent(page) {
  const picker = page.getByLabel("Model", { exact: true });
  await picker.waitFor();
  await poll(async () => (await picker.locator(`option[value="${MODEL}"]`).count()) === 1, { message: "acp:example in the picker" });
  await picker.selectOption(MODEL);
}

/** Sends a prompt to the agent and waits for its permission card. */
async function turnUntilPermission(page, ctx) {
  const threadId = await openNewChat(page, ctx);
  await pickAgent(page);
  await send(page, "improve the project");
  // The agent's text streams in, and its read call completes.
  await poll(async () => /I'll help you with that\./.test(await replyText(page)), { message: "the agent's text" });
  const card = assistantMessages(page).last().getByRole("group", { name: /^Approve / });
  const allow = card.getByRole("button", { name: "Allow this change" });
  await allow.waitFor();
  await waitIdle(page);
  const snap = await ctx.snapshot(threadId);
  assert.deepEqual(snap.messages.at(-1).status, { type: "requires-action", reason: "tool-calls" });
  assert.match(await replyText(page), /Now I understand the project structure/);
  // The agent's own options, in its order, and no generic Approve/Reject.
  assert.deepEqual(await card.getByRole("button").allInnerTexts(), ["Allow this change", "Skip this change"]);
  const call = snap.messages.at(-1).content.find((p) => p.type === "tool-call" && p.approval);
  assert.deepEqual(call?.approval?.options?.map((o) => `${o.id}:${o.kind}`), ["allow:allow-once", "reject:reject-once"]);
  assert.equal(await assistantMessages(page).last().getByText("permission", { exact: true }).count(), 0, "no raw permission part");
  return { threadId, card, allow };
}

/** The approvals of the next continuation the page sends. */
function nextApprovals(page) {
  return page
    .waitForRequest((r) => r.method() === "POST" && /\/runs\/stream$/.test(new URL(r.url()).pathname) && !!r.postDataJSON()?.approvals)
    .then((r) => r.postDataJSON().approvals);
}

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  test("an ACP agent's turn: text streams, its allow option (by keyboard) answers its permission, the turn ends", async ({ page, ctx }) => {
    const { threadId, card, allow } = await turnUntilPermission(page, ctx);
    await keepScreenshot(page, "acp-permission");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, an ACP agent's permission card");
    // Keyboard only: Tab moves between the agent's options; Enter chooses.
    await allow.focus();
    await page.keyboard.press("Tab");
    assert.equal(await card.getByRole("button", { name: "Skip this change" }).evaluate((el) => el === document.activeElement), true);
    await page.keyboard.press("Shift+Tab");
    assert.equal(await allow.evaluate((el) => el === document.activeElement), true);
    const sent = nextApprovals(page);
    await page.keyboard.press("Enter");
    assert.deepEqual(await sent, [{ tool_call_id: "call_2", approved: true, option_id: "allow" }]);
    await poll(async () => /successfully updated the configuration/.test(await replyText(page)), { message: "the agent's end after allow" });
    await waitIdle(page);
    const turn = (await ctx.snapshot(threadId)).messages.at(-1);
    assert.equal(turn.status.type, "complete");
    assert.equal(await assistantMessages(page).count(), 1, "one turn, continued in place");
    assert.doesNotMatch(await replyText(page), /skip the configuration update/);

    // The continuation's trace: one agent step, the approved edit's call in it.
    await assistantMessages(page).last().getByRole("button", { name: "Trace" }).click();
    const rows = page.getByRole("dialog", { name: "Trace of this reply" }).getByTestId("trace-row");
    await rows.first().waitFor();
    assert.deepEqual(
      await rows.evaluateAll((els) => els.map((e) => `${e.dataset.operation}:${e.dataset.status}`)),
      ["invoke_agent:ok", "execute_tool:ok", "chat:ok"],
    );
    assert.equal(await rows.nth(1).locator(".trace-name").innerText(), "execute_tool Modifying critical configuration file");
  });

  test("an ACP agent's turn: its reject option goes back by its id", async ({ page, ctx }) => {
    const { threadId, card } = await turnUntilPermission(page, ctx);
    const sent = nextApprovals(page);
    await card.getByRole("button", { name: "Skip this change" }).click();
    assert.deepEqual(await sent, [{ tool_call_id: "call_2", approved: false, option_id: "reject" }]);
    await poll(async () => /I'll skip the configuration update/.test(await replyText(page)), { message: "the agent's end after reject" });
    await waitIdle(page);
    const turn = (await ctx.snapshot(threadId)).messages.at(-1);
    assert.equal(turn.status.type, "complete");
    assert.doesNotMatch(await replyText(page), /successfully updated/);
  });
}, { serviceEnv: { THREADLINE_ACP_CONFIG: config } });
