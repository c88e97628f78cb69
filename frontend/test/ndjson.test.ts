import { test } from "node:test";
import assert from "node:assert/strict";
import { LineSplitter, readNdjson, NdjsonParseError } from "../lib/ndjson";

function streamOf(chunks: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const c of chunks) controller.enqueue(typeof c === "string" ? enc.encode(c) : c);
      controller.close();
    },
  });
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const v of it) out.push(v);
  return out;
}

test("LineSplitter keeps a partial line until the next chunk completes it", () => {
  const s = new LineSplitter();
  assert.deepEqual(s.push('{"a":1}\n{"b"'), ['{"a":1}']);
  assert.deepEqual(s.push(":2"), []);
  assert.deepEqual(s.push('}\n{"c":3}\n\n'), ['{"b":2}', '{"c":3}']);
  assert.deepEqual(s.flush(), []);
});

test("LineSplitter handles CRLF and a last line without newline", () => {
  const s = new LineSplitter();
  assert.deepEqual(s.push('{"a":1}\r\n{"b":2}'), ['{"a":1}']);
  assert.deepEqual(s.flush(), ['{"b":2}']);
});

test("readNdjson splits lines across chunk boundaries", async () => {
  const lines = [
    { type: "snapshot", run_id: "r", sequence: 1 },
    { type: "token", run_id: "r", sequence: 2, message_id: "m", text: "Hel" },
    { type: "token", run_id: "r", sequence: 3, message_id: "m", text: "lo" },
  ];
  const text = lines.map((l) => JSON.stringify(l)).join("\n") + "\n";
  // Every possible single split point, and one byte at a time.
  for (let cut = 0; cut <= text.length; cut++) {
    const got = await collect(readNdjson(streamOf([text.slice(0, cut), text.slice(cut)])));
    assert.deepEqual(got, lines, `split at ${cut}`);
  }
  const bytes = new TextEncoder().encode(text);
  const oneByOne = Array.from(bytes, (b) => new Uint8Array([b]));
  assert.deepEqual(await collect(readNdjson(streamOf(oneByOne))), lines);
});

test("readNdjson decodes UTF-8 split inside a character", async () => {
  const text = JSON.stringify({ text: "héllo — 世界 🌍" }) + "\n";
  const bytes = new TextEncoder().encode(text);
  const chunks: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i += 3) chunks.push(bytes.slice(i, i + 3));
  assert.deepEqual(await collect(readNdjson(streamOf(chunks))), [{ text: "héllo — 世界 🌍" }]);
});

test("readNdjson yields several lines packed in one chunk and a final line without newline", async () => {
  const got = await collect(readNdjson(streamOf(['{"a":1}\n{"a":2}\n{"a":3}'])));
  assert.deepEqual(got, [{ a: 1 }, { a: 2 }, { a: 3 }]);
});

test("readNdjson yields a line before the stream ends", async () => {
  const enc = new TextEncoder();
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({ start(c) { controller = c; } });
  const it = readNdjson(body)[Symbol.asyncIterator]();
  controller.enqueue(enc.encode('{"first":true}\n{"sec'));
  const first = await it.next();
  assert.deepEqual(first.value, { first: true });
  controller.enqueue(enc.encode('ond":true}\n'));
  controller.close();
  assert.deepEqual((await it.next()).value, { second: true });
  assert.equal((await it.next()).done, true);
});

test("readNdjson reports a malformed line", async () => {
  await assert.rejects(collect(readNdjson(streamOf(['{"a":1}\n{oops\n']))), NdjsonParseError);
});

test("breaking out of readNdjson cancels the stream", async () => {
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    start(c) { c.enqueue(new TextEncoder().encode('{"a":1}\n{"a":2}\n')); },
    cancel() { cancelled = true; },
  });
  for await (const v of readNdjson(body)) {
    assert.deepEqual(v, { a: 1 });
    break;
  }
  assert.equal(cancelled, true);
});
