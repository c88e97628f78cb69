// A tiny OpenAI-compatible chat completions server (SSE) for the e2e tests:
// it streams a fixed Markdown reply, so the chat's Markdown and code blocks
// are tested against the real service's OpenAI provider.

import { createServer } from "node:http";

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
  "That is all.",
].join("\n");

export function startFakeOpenAI() {
  const requests = [];
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
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.write(`data: ${chunk({ role: "assistant", content: "" })}\n\n`);
      for (let i = 0; i < MARKDOWN_REPLY.length; i += 7) {
        res.write(`data: ${chunk({ content: MARKDOWN_REPLY.slice(i, i + 7) })}\n\n`);
        await new Promise((r) => setTimeout(r, 10));
      }
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
        close: () => new Promise((r) => server.close(() => r())),
      });
    });
  });
}
