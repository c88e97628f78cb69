// A tiny OpenAI-compatible chat completions server (SSE) for the e2e tests:
// it streams a fixed Markdown reply, so the chat's Markdown and code blocks
// are tested against the real service's OpenAI provider.
//
// A prompt containing "[gate:NAME]" makes a slow stream the test controls:
// GATED_FIRST_TOKEN at once, then the words "a1" … "a30" (10 ms apart), then
// nothing until release(NAME) (or 30 s, so that a failed test cannot hang the
// run; the service's model idle timeout is 60 s), then "b1" … "b30". The
// whole reply is GATED_REPLY; what comes before the hold, GATED_BEFORE.

import { createServer } from "node:http";

export const GATED_FIRST_TOKEN = "gated-first-token";
const words = (p) => Array.from({ length: 30 }, (_, i) => ` ${p}${i + 1}`);
const BEFORE = [GATED_FIRST_TOKEN, ...words("a")];
const AFTER = words("b");
export const GATED_BEFORE = BEFORE.join("");
export const GATED_REPLY = [...BEFORE, ...AFTER].join("");

export const MARKDOWN_REPLY = [
  "Here is **bold** text and a list:",
  "",
  "- first item",
  "- second item",
  "",
  "```python",
  'def greet(name):',
  '    return f"hello {name}"',
  "```",
  "",
  "| name | score |",
  "| ---- | ----: |",
  "| ada  | 10    |",
  "| bob  | 7     |",
  "",
  "This is ~~wrong~~ right, see [the docs](https://example.com/docs).",
  "",
  "That is all.",
].join("\n");

export function startFakeOpenAI() {
  const requests = [];
  const gates = new Map(); // name -> { promise, open }
  const gate = (name) => {
    if (!gates.has(name)) {
      let open;
      const promise = new Promise((r) => (open = r));
      gates.set(name, { promise, open });
    }
    return gates.get(name);
  };
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", async () => {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "not found" } }));
        return;
      }
      let stream = true;
      try {
        stream = JSON.parse(body).stream !== false;
      } catch {
        /* keep streaming */
      }
      const id = "chatcmpl-e2e";
      const chunk = (delta, finish = null) =>
        JSON.stringify({
          id,
          object: "chat.completion.chunk",
          created: Math.floor(Date.now() / 1000),
          model: "fake",
          choices: [{ index: 0, delta, finish_reason: finish }],
        });
      if (!stream) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            id,
            object: "chat.completion",
            created: Math.floor(Date.now() / 1000),
            model: "fake",
            choices: [{ index: 0, message: { role: "assistant", content: MARKDOWN_REPLY }, finish_reason: "stop" }],
            usage: { prompt_tokens: 10, completion_tokens: 20, total_tokens: 30 },
          }),
        );
        return;
      }
      // The service may hang up mid-stream (a cancelled run): stop writing.
      res.on("error", () => {});
      const gone = () => res.destroyed || res.writableEnded;
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.write(`data: ${chunk({ role: "assistant", content: "" })}\n\n`);
      const gated = /\[gate:([\w-]+)\]/.exec(body);
      if (gated) {
        const g = gate(gated[1]);
        for (const [i, word] of BEFORE.entries()) {
          if (gone()) return;
          if (i > 0) await new Promise((r) => setTimeout(r, 10));
          res.write(`data: ${chunk({ content: word })}\n\n`);
        }
        let timer;
        await Promise.race([g.promise, new Promise((r) => (timer = setTimeout(r, 30_000)))]);
        clearTimeout(timer);
        for (const word of AFTER) {
          if (gone()) return;
          res.write(`data: ${chunk({ content: word })}\n\n`);
          await new Promise((r) => setTimeout(r, 10));
        }
        if (gone()) return;
        res.write(`data: ${chunk({}, "stop")}\n\n`);
        res.write("data: [DONE]\n\n");
        res.end();
        return;
      }
      for (let i = 0; i < MARKDOWN_REPLY.length; i += 7) {
        if (gone()) return;
        res.write(`data: ${chunk({ content: MARKDOWN_REPLY.slice(i, i + 7) })}\n\n`);
        await new Promise((r) => setTimeout(r, 10));
      }
      if (gone()) return;
      res.write(`data: ${chunk({}, "stop")}\n\n`);
      res.write("data: [DONE]\n\n");
      res.end();
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      resolve({
        url: `http://127.0.0.1:${port}/v1`,
        requests,
        /** Lets a "[gate:name]" stream go on. */
        release: (name) => gate(name).open(),
        close: () =>
          new Promise((r) => {
            for (const g of gates.values()) g.open();
            server.close(() => r());
            server.closeAllConnections();
          }),
      });
    });
  });
}
