// The example app frontend/examples/ai-sdk-chat in Chromium: a stock
// useChat (@ai-sdk/react, DefaultChatTransport) and assistant-ui's AI SDK
// runtime (useChatRuntime) with Threadline's /api/v1/ui/chat as their
// backend. A conversation with a regenerate (two branches in the native
// tree), a reload mid-reply that resumes, a tool call. The example has its
// own package.json (React 19.3): npm ci there when its node_modules is
// missing (.ci/npm-ci does it too), then an esbuild bundle.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createWriteStream, existsSync } from "node:fs";
import { join } from "node:path";
import { after } from "node:test";
import { browserSuite } from "./harness.mjs";
import { poll, seriousViolations } from "./helpers.mjs";
import { artifacts, frontend } from "./stack.mjs";

const example = join(frontend, "examples", "ai-sdk-chat");
let server = null;

function sh(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: example, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} in ${example} failed:\n${r.stdout}\n${r.stderr}`);
}

/** The example app on a free port, proxying to the suite's service (started once). */
async function exampleUrl(serviceUrl) {
  if (server) return server.url;
  if (!existsSync(join(example, "node_modules", ".package-lock.json"))) sh("npm", ["ci", "--no-audit", "--no-fund"]);
  sh(process.execPath, ["build.mjs"]);
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(process.execPath, ["serve.mjs"], {
    cwd: example,
    env: { ...process.env, PORT: String(port), THREADLINE_API_URL: serviceUrl },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log = createWriteStream(join(artifacts, "aisdk.example.log"));
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  server = { child, url: `http://127.0.0.1:${port}` };
  await poll(async () => (await fetch(`${server.url}/`)).ok, { timeout: 20_000, message: "the example app" });
  return server.url;
}

after(() => {
  server?.child.kill();
});

const lastAssistant = (page) => page.getByTestId("assistant-message").last();
const nativeText = (m) =>
  m.content
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");
const chatId = (page) => new URL(page.url()).searchParams.get("chat");

async function sendText(page, text) {
  await page.getByLabel("Message", { exact: true }).fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

async function waitReady(page) {
  await poll(async () => (await page.getByTestId("status").textContent()) === "ready", { message: "useChat ready" });
}

browserSuite(
  import.meta.filename ?? import.meta.url,
  (test) => {
    test("useChat holds a conversation and regenerates into a second branch", async ({ page, ctx }) => {
      await page.goto(`${await exampleUrl(ctx.serviceUrl)}/`);
      await page.getByLabel("Message", { exact: true }).waitFor();
      const id = chatId(page);
      assert.match(id, /^[0-9a-f-]{36}$/);
      await sendText(page, "hello there");
      await page.getByTestId("user-message").first().waitFor();
      await waitReady(page);
      let snap = await ctx.snapshot(id);
      assert.equal(snap.messages.length, 2);
      assert.equal(await lastAssistant(page).getAttribute("data-id"), snap.messages[1].id);
      assert.equal(await lastAssistant(page).textContent(), nativeText(snap.messages[1]));
      assert.deepEqual(await seriousViolations(page), [], "axe-core, the useChat example");

      const first = snap.messages[1].id;
      await page.getByRole("button", { name: "Regenerate" }).click();
      await poll(async () => (await lastAssistant(page).getAttribute("data-id")) !== first, { message: "the new reply" });
      await waitReady(page);
      snap = await ctx.snapshot(id);
      const user = snap.messages[0].id;
      const replies = snap.messageRepository.messages.filter((m) => m.parentId === user).map((m) => m.message.id);
      assert.deepEqual(replies, [first, snap.messages[1].id], "two branches under the user message");
      assert.equal(await page.getByTestId("assistant-message").count(), 1);
      assert.equal(await lastAssistant(page).textContent(), nativeText(snap.messages[1]));

      await sendText(page, "and then?");
      await poll(async () => (await page.getByTestId("assistant-message").count()) === 2, { message: "the second reply" });
      await waitReady(page);
      snap = await ctx.snapshot(id);
      assert.equal(snap.messages.length, 4);
      assert.equal(nativeText(snap.messages[2]), "and then?");
      assert.equal(snap.messages[1].id, replies[1], "sent on the branch shown");
    });

    test("a reload mid-reply resumes the reply", async ({ page, ctx }) => {
      await page.goto(`${await exampleUrl(ctx.serviceUrl)}/`);
      await page.getByLabel("Message", { exact: true }).waitFor();
      const id = chatId(page);
      await sendText(page, "tell me a long story");
      await poll(async () => ((await lastAssistant(page).textContent().catch(() => "")) ?? "").length > 10, { message: "some of the reply" });
      const mid = await ctx.snapshot(id);
      assert.ok(mid.active_run, "the reply still runs at the reload");
      await page.reload();
      await page.getByLabel("Message", { exact: true }).waitFor();
      assert.equal(chatId(page), id);
      await poll(async () => (await ctx.snapshot(id)).active_run === null, { message: "the run's end" });
      await waitReady(page);
      const snap = await ctx.snapshot(id);
      assert.equal(await page.getByTestId("assistant-message").count(), 1);
      assert.equal(await page.getByTestId("user-message").count(), 1);
      assert.equal(await lastAssistant(page).getAttribute("data-id"), mid.active_run.message_id);
      assert.equal(await lastAssistant(page).textContent(), nativeText(snap.messages[1]), "the whole reply, once");
    });

    test("Stop ends the reply and cancels the run", async ({ page, ctx }) => {
      await page.goto(`${await exampleUrl(ctx.serviceUrl)}/`);
      await page.getByLabel("Message", { exact: true }).waitFor();
      const id = chatId(page);
      await sendText(page, "tell me a long story");
      await poll(async () => ((await lastAssistant(page).textContent().catch(() => "")) ?? "").length > 10, { message: "some of the reply" });
      await page.getByRole("button", { name: "Stop" }).click();
      await waitReady(page);
      const snap = await poll(async () => {
        const s = await ctx.snapshot(id);
        return s.active_run === null ? s : null;
      }, { message: "the run's end" });
      assert.deepEqual(snap.messages[1].status, { type: "incomplete", reason: "cancelled" });
    });

    test("useChat shows a tool call with its result", async ({ page, ctx }) => {
      await page.goto(`${await exampleUrl(ctx.serviceUrl)}/?model=builtin:demo`);
      await page.getByLabel("Message", { exact: true }).waitFor();
      await sendText(page, "what is 12*7?");
      await waitReady(page);
      const tool = page.getByTestId("tool-call");
      assert.equal(await tool.textContent(), 'calculator({"expression":"12*7"}) → 84');
      assert.match(await lastAssistant(page).textContent(), /84/);
      assert.deepEqual(await seriousViolations(page), [], "axe-core, a tool call");
    });

    test("assistant-ui's AI SDK runtime talks to the same route: a conversation with a tool call", async ({ page, ctx }) => {
      await page.goto(`${await exampleUrl(ctx.serviceUrl)}/assistant-ui?model=builtin:demo`);
      await page.getByLabel("Message", { exact: true }).waitFor();
      await sendText(page, "what is 12*7?");
      const tool = page.getByTestId("tool-call");
      await poll(async () => (await tool.textContent().catch(() => "")) === 'calculator({"expression":"12*7"}) → 84', {
        message: "the tool call with its result",
      });
      await poll(async () => /That is what the tools said/.test((await lastAssistant(page).textContent()) ?? ""), { message: "the answer" });
      // The thread it made: the most recently updated one.
      const list = await ctx.service("/threads?limit=1");
      const tid = list.body.threads[0].thread_id;
      await poll(async () => (await ctx.snapshot(tid)).active_run === null, { message: "the run's end" });
      const snap = await ctx.snapshot(tid);
      assert.equal(nativeText(snap.messages[0]), "what is 12*7?");
      assert.equal(snap.messages[1].content.find((p) => p.type === "tool-call")?.result, 84);

      await sendText(page, "hello");
      await poll(async () => (await page.getByTestId("assistant-message").count()) === 2, { message: "the second reply" });
      await poll(async () => (await ctx.snapshot(tid)).messages.length === 4, { message: "the second turn in the thread" });
      assert.deepEqual(await seriousViolations(page), [], "axe-core, the assistant-ui example");
    });
  },
  { web: false, serviceEnv: { THREADLINE_BUILTIN_TOKENS: "80" } },
);
