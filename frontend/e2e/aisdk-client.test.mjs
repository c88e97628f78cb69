// The AI SDK UI message stream routes (POST /api/v1/ui/chat, GET
// /api/v1/ui/chat/{id}/stream) driven by the AI SDK's own chat machinery in
// Node: AbstractChat with DefaultChatTransport, the code useChat runs, of
// the newest ai 5.x, 6.x and 7.x that install here, and of 5.0.216 and
// 6.0.230, whose chunk schemas are strict (an unknown field in any chunk
// fails the stream). Against the service alone (no web app), started by
// stack.mjs.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as ai5 from "ai5";
import * as ai6 from "ai6";
import * as ai7 from "ai7";
import * as ai5strict from "ai5strict";
import * as ai6strict from "ai6strict";
import { startStack } from "./stack.mjs";

const versions = { ai5, ai6, ai7, ai5strict, ai6strict };

/** The ChatState a framework binding (React's, Vue's) keeps: plain arrays here. */
class State {
  constructor(messages = []) {
    this.messages = messages;
    this.status = "ready";
    this.error = undefined;
  }
  pushMessage = (m) => {
    this.messages = this.messages.concat(m);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (i, m) => {
    this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)];
  };
  snapshot = (x) => structuredClone(x);
}

const text = (m) =>
  m.parts
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");

const nativeText = (m) =>
  m.content
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe("aisdk-client", () => {
  let stack;
  before(
    async () => {
      stack = await startStack("aisdk-client", { web: false, serviceEnv: { THREADLINE_BUILTIN_TOKENS: "60" } });
    },
    { timeout: 240_000 },
  );
  after(async () => {
    await stack?.stop();
  });

  const get = async (path) => {
    const res = await fetch(`${stack.serviceUrl}/api/v1${path}`);
    assert.equal(res.status, 200, `GET ${path}: ${res.status}`);
    return res.json();
  };

  for (const [name, sdk] of Object.entries(versions)) {
    describe(name, () => {
      const errors = [];
      const newChat = (id, messages = []) => {
        class NodeChat extends sdk.AbstractChat {}
        return new NodeChat({
          id,
          state: new State(messages),
          transport: new sdk.DefaultChatTransport({ api: `${stack.serviceUrl}/api/v1/ui/chat` }),
          onError: (err) => errors.push(err),
        });
      };
      const chatId = (what) => `${name}-${what}-${Math.random().toString(36).slice(2, 10)}`;

      it("sends, regenerates into a second branch, and sends again on the branch shown", { timeout: 60_000 }, async () => {
        const chat = newChat(chatId("send"));
        await chat.sendMessage({ text: "hello" });
        assert.deepEqual(errors, []);
        assert.equal(chat.status, "ready");
        assert.equal(chat.messages.length, 2);
        const [user, reply] = chat.messages;
        assert.equal(reply.role, "assistant");
        assert.equal(reply.metadata.status, "succeeded");
        assert.ok(reply.metadata.runId && reply.metadata.usage && reply.metadata.model, JSON.stringify(reply.metadata));
        const tid = reply.metadata.threadId;
        let snap = await get(`/threads/${tid}/messages`);
        assert.equal(snap.messages.length, 2);
        assert.equal(snap.messages[1].id, reply.id, "the reply's id is the thread's assistant message id");
        assert.equal(nativeText(snap.messages[1]), text(reply));
        assert.equal(nativeText(snap.messages[0]), "hello");
        assert.ok(text(reply).length > 0);

        await chat.regenerate();
        assert.deepEqual(errors, []);
        assert.equal(chat.messages.length, 2);
        const reply2 = chat.messages[1];
        assert.notEqual(reply2.id, reply.id);
        assert.equal(chat.messages[0].id, user.id);
        snap = await get(`/threads/${tid}/messages`);
        const userId = snap.messages[0].id;
        const replies = snap.messageRepository.messages.filter((m) => m.parentId === userId).map((m) => m.message.id);
        assert.deepEqual(replies, [reply.id, reply2.id], "two branches under the user message");
        assert.equal(snap.messages[1].id, reply2.id, "the regenerated reply is shown");
        assert.equal(nativeText(snap.messages[1]), text(reply2));

        await chat.sendMessage({ text: "and more" });
        assert.deepEqual(errors, []);
        assert.equal(chat.messages.length, 4);
        snap = await get(`/threads/${tid}/messages`);
        assert.deepEqual(
          snap.messages.map((m) => m.id),
          [userId, reply2.id, snap.messages[2].id, chat.messages[3].id],
        );
        assert.equal(nativeText(snap.messages[2]), "and more");
      });

      it("shows a tool call with its input and output, then the answer", { timeout: 60_000 }, async () => {
        const chat = newChat(chatId("tool"));
        await chat.sendMessage({ text: "what is 12*7?" }, { body: { run_config: { model: "builtin:demo" } } });
        assert.deepEqual(errors, []);
        const reply = chat.messages[1];
        const call = reply.parts.find((p) => p.type === "dynamic-tool");
        assert.ok(call, JSON.stringify(reply.parts));
        assert.equal(call.toolName, "calculator");
        assert.equal(call.state, "output-available");
        assert.deepEqual(call.input, { expression: "12*7" });
        assert.equal(call.output, 84);
        assert.equal(reply.parts.filter((p) => p.type === "step-start").length, 2, "two steps");
        const after = reply.parts.slice(reply.parts.indexOf(call));
        assert.ok(after.some((p) => p.type === "text" && p.text.includes("84")), JSON.stringify(reply.parts));
        const snap = await get(`/threads/${reply.metadata.threadId}/messages`);
        const native = snap.messages[1].content.find((p) => p.type === "tool-call");
        assert.equal(native.toolCallId, call.toolCallId);
        assert.equal(native.result, 84);
      });

      it("reports a model's failure as the SDK's error, with the run's status", { timeout: 60_000 }, async () => {
        const chat = newChat(chatId("error"));
        await chat.sendMessage({ text: "hi" }, { body: { run_config: { model: "needs-key" } } });
        assert.equal(errors.length, 1, String(errors));
        assert.match(errors[0].message, /THREADLINE_E2E_MISSING_KEY/);
        errors.length = 0;
        assert.equal(chat.status, "error");
        assert.match(chat.error?.message ?? "", /THREADLINE_E2E_MISSING_KEY/);
        // The SDK stops reading at the error chunk; the metadata before it
        // names the error's code.
        const reply = chat.messages[1];
        assert.equal(reply.role, "assistant");
        assert.equal(reply.metadata.error.code, "model_not_configured");
        const run = await get(`/threads/${reply.metadata.threadId}/runs/${reply.metadata.runId}`);
        assert.equal(run.status, "failed");
      });

      it("resumes a reply mid-stream after a reload, and after the run ended", { timeout: 60_000 }, async () => {
        const id = chatId("resume");
        const first = newChat(id);
        const sending = first.sendMessage({ text: "tell me a long story" });
        let tid = null;
        let snap = null;
        for (let i = 0; i < 200; i++) {
          await sleep(25);
          tid ??= first.messages[1]?.metadata?.threadId ?? null;
          if (!tid) continue;
          snap = await get(`/threads/${tid}/messages`);
          if (snap.active_run && snap.active_run.sequence > 3) break;
        }
        assert.ok(snap?.active_run, "the run was joined while it ran");
        await first.stop(); // the page goes away; the run goes on
        await sending;

        // The reloaded page: the messages the service has (its own ids),
        // without the running reply, as the AI SDK expects (it keeps
        // finished messages only); then resumeStream().
        const loaded = snap.messages
          .filter((m) => m.id !== snap.active_run.message_id)
          .map((m) => ({ id: m.id, role: m.role, parts: [{ type: "text", text: nativeText(m) }] }));
        assert.equal(loaded.length, 1);
        const second = newChat(id, loaded);
        await second.resumeStream();
        assert.deepEqual(errors, []);
        assert.equal(second.status, "ready");
        const final = await get(`/threads/${tid}/messages`);
        assert.equal(final.active_run, null);
        assert.equal(second.messages.length, 2);
        assert.equal(second.messages[1].id, final.messages[1].id);
        assert.equal(text(second.messages[1]), nativeText(final.messages[1]), "the whole reply, once");
        assert.equal(second.messages[1].metadata.status, "succeeded");

        if (!name.endsWith("strict")) {
          // The newest versions replace a message of the same id, so the
          // partial reply may be loaded too. (5.0.216 and 6.0.230 would
          // append the replay to it.)
          const partial = { id: snap.active_run.message_id, role: "assistant", parts: [{ type: "text", text: "partial" }] };
          const withPartial = newChat(id, [...loaded, partial]);
          await withPartial.resumeStream();
          assert.deepEqual(errors, []);
          assert.equal(withPartial.messages.length, 2);
          assert.equal(text(withPartial.messages[1]), nativeText(final.messages[1]));
        }

        // After the end: the same reply again.
        const third = newChat(id, [second.messages[0], { id: final.messages[1].id, role: "assistant", parts: [] }]);
        await third.resumeStream();
        assert.deepEqual(errors, []);
        assert.equal(third.messages.length, 2);
        assert.equal(text(third.messages[1]), nativeText(final.messages[1]));

        // Nothing to resume: 204, the chat stays as it is.
        const none = newChat(chatId("none"));
        await none.resumeStream();
        assert.deepEqual(errors, []);
        assert.equal(none.status, "ready");
        assert.equal(none.messages.length, 0);
      });
    });
  }
});
