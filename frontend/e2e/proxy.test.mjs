// The web app's /api/v1 proxy: unbuffered NDJSON, hang-ups, pass-through.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { GATED_FIRST_TOKEN, GATED_REPLY } from "./fake-openai.mjs";
import { browserSuite } from "./harness.mjs";
import {
  poll,
  redPng,
  ndjsonReader,
  deadline,
} from "./helpers.mjs";

browserSuite(import.meta.filename ?? import.meta.url, (test) => {
  test("proxy streams NDJSON unbuffered: the first token arrives while the model still holds the rest", async ({ page, ctx, t }) => {
    if (!ctx.releaseGate) return t.skip("needs the harness's fake model");
    // The "markdown" model (e2e/fake-openai.mjs) sends one token for a
    // "[gate:…]" prompt, then nothing until the test releases it. Through an
    // unbuffered proxy that token reaches the client while the run is still
    // waiting; a proxy that buffers (the whole body, a block of bytes, a gzip
    // stream) holds it back and the read below times out, whatever the load.
    const gated = (gate) => ({
      message: { content: `One token, then wait [gate:${gate}]` },
      parent_message_id: null,
      run_config: { model: "markdown" },
    });

    // 1) A plain fetch client (it asks for gzip) through the Next proxy.
    // The deadline covers the response's headers too: Next sends them with the
    // first chunk of the body.
    const gate = `node-${randomUUID()}`;
    const threadId = randomUUID();
    const firstToken = deadline(20_000, "first token through the proxy while the model holds the rest (does the proxy buffer?)");
    const seen = [];
    let events;
    try {
      const res = await fetch(`${ctx.baseUrl}/api/v1/threads/${threadId}/runs/stream`, {
        method: "POST",
        headers: { "content-type": "application/json", "accept-encoding": "gzip, deflate, br" },
        body: JSON.stringify(gated(gate)),
        signal: firstToken.signal,
      });
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type") ?? "", /ndjson/);
      assert.equal(res.headers.get("content-encoding"), null, "the stream is not compressed");
      events = ndjsonReader(res.body);
      for (;;) {
        const ev = await events.next();
        assert.ok(ev, "the stream ended before a token");
        seen.push(ev);
        if (ev.type === "token") break;
      }
      firstToken.done();
      assert.equal(seen.at(-1).text, GATED_FIRST_TOKEN);
      const run = await ctx.service(`/threads/${threadId}/runs/${seen[0].run_id}`);
      assert.equal(run.body.status, "running", "the run is still waiting for the model");
    } finally {
      firstToken.done();
      ctx.releaseGate(gate);
    }
    for (;;) {
      const ev = await events.next();
      if (!ev) break;
      seen.push(ev);
    }
    const last = seen.at(-1);
    assert.equal(last.type, "snapshot");
    assert.equal(last.run_status, "succeeded");
    seen.forEach((e, i) => assert.equal(e.sequence, i + 1, "every event, in order"));
    const tokens = seen.filter((e) => e.type === "token").map((e) => e.text).join("");
    assert.equal(tokens, GATED_REPLY);

    // 2) The browser, through the same origin (it asks for gzip, br and zstd).
    await page.goto(`${ctx.baseUrl}/welcome`);
    const browserGate = `browser-${randomUUID()}`;
    let browserResult;
    try {
      browserResult = await page.evaluate(async (body) => {
        const threadId = crypto.randomUUID();
        // The deadline covers the headers too (they come with the first chunk).
        const ac = new AbortController();
        const timer = setTimeout(() => ac.abort(), 20_000);
        let buf = "";
        try {
          const r = await fetch(`/api/v1/threads/${threadId}/runs/stream`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify(body),
            signal: ac.signal,
          });
          const reader = r.body.getReader();
          const dec = new TextDecoder();
          let runId = null;
          for (;;) {
            const chunk = await reader.read();
            if (chunk.done) return { error: "stream ended before a token", buf };
            buf += dec.decode(chunk.value, { stream: true });
            let nl;
            while ((nl = buf.indexOf("\n")) >= 0) {
              const ev = JSON.parse(buf.slice(0, nl));
              buf = buf.slice(nl + 1);
              if (ev.type === "snapshot") runId = ev.run_id;
              if (ev.type === "token") {
                clearTimeout(timer);
                const run = await (await fetch(`/api/v1/threads/${threadId}/runs/${runId}`)).json();
                await reader.cancel();
                return { status: run.status, text: ev.text, threadId, runId };
              }
            }
          }
        } catch (err) {
          return { error: ac.signal.aborted ? "no token within 20 s while the model waits (does the proxy buffer?)" : String(err), buf };
        } finally {
          clearTimeout(timer);
        }
      }, gated(browserGate));
    } finally {
      ctx.releaseGate(browserGate);
    }
    assert.equal(browserResult.error, undefined, JSON.stringify(browserResult));
    assert.equal(browserResult.text, GATED_FIRST_TOKEN);
    assert.equal(browserResult.status, "running", JSON.stringify(browserResult));
    // on_disconnect defaults to continue: the run still finishes.
    await poll(async () => (await ctx.service(`/threads/${browserResult.threadId}/runs/${browserResult.runId}`)).body.status === "succeeded", {
      message: "the browser's run to finish after it disconnected",
    });

    // 3) A long reply of the built-in model comes through whole and in order,
    // its first token while the run is running.
    const builtinThread = randomUUID();
    const res2 = await fetch(`${ctx.baseUrl}/api/v1/threads/${builtinThread}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ message: { content: "slow please" }, parent_message_id: null }),
    });
    assert.equal(res2.status, 200);
    const events2 = ndjsonReader(res2.body);
    const all = [];
    let statusAtFirstToken = null;
    for (;;) {
      const ev = await events2.next();
      if (!ev) break;
      all.push(ev);
      if (ev.type === "token" && statusAtFirstToken === null) {
        statusAtFirstToken = (await ctx.service(`/threads/${builtinThread}/runs/${ev.run_id}`)).body.status;
      }
    }
    assert.equal(statusAtFirstToken, "running", "the first token came through while the run was running");
    assert.equal(all.at(-1).type, "snapshot");
    assert.equal(all.at(-1).run_status, "succeeded");
    assert.equal(all.filter((e) => e.type === "token").length, 200);
    all.forEach((e, i) => assert.equal(e.sequence, i + 1, "every event, in order"));
  });

  test("proxy: closing the client connection closes the upstream one", async ({ ctx, t }) => {
    if (!ctx.releaseGate) return t.skip("needs the harness's fake model");
    // The model waits for the gate, so the run can only end through the
    // disconnect (on_disconnect: cancel), however slow the machine.
    const gate = `close-${randomUUID()}`;
    const threadId = randomUUID();
    const ac = new AbortController();
    try {
      const res = await fetch(`${ctx.baseUrl}/api/v1/threads/${threadId}/runs/stream`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          message: { content: `abandon me [gate:${gate}]` },
          parent_message_id: null,
          run_config: { model: "markdown" },
          on_disconnect: "cancel",
        }),
        signal: ac.signal,
      });
      const events = ndjsonReader(res.body);
      const first = await events.next();
      assert.ok(first, "a snapshot first");
      const runId = first.run_id;
      assert.equal((await ctx.service(`/threads/${threadId}/runs/${runId}`)).body.status, "running");
      ac.abort();
      const status = await poll(async () => {
        const s = (await ctx.service(`/threads/${threadId}/runs/${runId}`)).body.status;
        return s !== "running" ? s : null;
      }, { timeout: 15_000, message: "the run to stop after the client left" });
      assert.equal(status, "cancelled");
    } finally {
      ctx.releaseGate(gate);
    }
  });

  test("proxy passes status codes, error bodies and headers through", async ({ ctx }) => {
    for (const [method, path, body] of [
      ["GET", "/threads/not-a-uuid", undefined],
      ["GET", `/threads/${randomUUID()}`, undefined],
      ["POST", `/threads/${randomUUID()}/runs/stream`, "{not json"],
      ["GET", "/threads?limit=1", undefined],
    ]) {
      const init = { method, headers: { "content-type": "application/json" }, body };
      const direct = await fetch(`${ctx.serviceUrl}/api/v1${path}`, init);
      const proxied = await fetch(`${ctx.baseUrl}/api/v1${path}`, init);
      assert.equal(proxied.status, direct.status, `${method} ${path}`);
      assert.equal(proxied.headers.get("content-type"), direct.headers.get("content-type"));
      assert.ok(proxied.headers.get("x-request-id"), "the service's x-request-id");
      const [a, b] = [await direct.json(), await proxied.json()];
      if (direct.status >= 400) assert.deepEqual(b.error.code, a.error.code);
      else assert.deepEqual(Object.keys(b), Object.keys(a));
    }
    // Uploads stream through too.
    const form = new FormData();
    form.append("file", new Blob([redPng()], { type: "image/png" }), "red.png");
    const up = await fetch(`${ctx.baseUrl}/api/v1/attachments`, { method: "POST", body: form });
    assert.ok(up.ok, `upload: ${up.status}`);
    const att = await up.json();
    const bytes = Buffer.from(await (await fetch(`${ctx.baseUrl}${att.url}`)).arrayBuffer());
    assert.deepEqual(bytes, redPng());
  });
});
