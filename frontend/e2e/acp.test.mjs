// An external agent's turn in the app, over ACP (API.md, "ACP agents"):
// the service runs the ACP Go SDK's own example agent (built from the
// module cache by stack.mjs) as the model acp:example. Picked in the model
// picker, it streams its text and a tool call, asks a permission for an
// edit (the turn waits: requires_action), and the person's Approve or
// Reject goes back to the agent as its allow or reject option; the agent
// ends its turn accordingly. The continuation's trace shows the approved
// call inside the agent's one step.

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
  const approve = assistantMessages(page).last().getByRole("button", { name: "Approve" });
  await approve.waitFor();
  await waitIdle(page);
  const snap = await ctx.snapshot(threadId);
  assert.deepEqual(snap.messages.at(-1).status, { type: "requires-action", reason: "tool-calls" });
  assert.match(await replyText(page), /Now I understand the project structure/);
  return { threadId, approve };
}

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  test("an ACP agent's turn: text streams, Approve answers its permission, the turn ends", async ({ page, ctx }) => {
    const { threadId, approve } = await turnUntilPermission(page, ctx);
    await keepScreenshot(page, "acp-permission");
    assert.deepEqual(await seriousViolations(page), [], "axe-core, an ACP agent's permission card");
    await approve.click();
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

  test("an ACP agent's turn: Reject goes back as its reject option", async ({ page, ctx }) => {
    const { threadId } = await turnUntilPermission(page, ctx);
    await assistantMessages(page).last().getByRole("button", { name: "Reject" }).click();
    await poll(async () => /I'll skip the configuration update/.test(await replyText(page)), { message: "the agent's end after reject" });
    await waitIdle(page);
    const turn = (await ctx.snapshot(threadId)).messages.at(-1);
    assert.equal(turn.status.type, "complete");
    assert.doesNotMatch(await replyText(page), /successfully updated/);
  });
}, { serviceEnv: { THREADLINE_ACP_CONFIG: config } });
