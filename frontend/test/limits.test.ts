import { test } from "node:test";
import assert from "node:assert/strict";
import { attachRefusal, formatBytes, takeOfferedName, typeRefusal, type Limits } from "../lib/limits";

const limits: Limits = {
  max_body_bytes: 1 << 20,
  max_message_bytes: 256 << 10,
  max_attachment_bytes: 10 << 20,
  max_attachments: 10,
  attachment_types: ["image/png"],
};

test("formatBytes", () => {
  const cases: [number, string][] = [
    [0, "0 B"],
    [1023, "1023 B"],
    [1024, "1 KiB"],
    [1536, "1.5 KiB"],
    [10 << 20, "10 MiB"],
    [11 * 1024 * 1024 + 70, "11 MiB"],
    [Math.round(10.25 * 1024 * 1024), "10.3 MiB"],
  ];
  for (const [n, want] of cases) assert.equal(formatBytes(n), want, `formatBytes(${n})`);
});

test("attachRefusal refuses only a file over the upload limit", () => {
  assert.equal(attachRefusal({ name: "a.png", size: 10 << 20 }, limits), null, "exactly at the limit");
  assert.equal(attachRefusal({ name: "a.png", size: 1 }, limits), null);
  assert.equal(attachRefusal({ name: "a.png", size: 1 << 30 }, null), null, "limits unknown: the service decides");
  assert.equal(attachRefusal({ name: "a.png", size: 1 << 30 }, { ...limits, max_attachment_bytes: 0 }), null, "no limit given");
  const r = attachRefusal({ name: "big.png", size: (10 << 20) + 1 }, limits);
  assert.deepEqual(r, {
    code: "too_large",
    message: "Could not attach big.png: it is 10,485,761 bytes, over the 10,485,760 bytes limit.",
  });
  assert.equal(
    attachRefusal({ name: "big.png", size: 11 << 20 }, limits)?.message,
    "Could not attach big.png: it is 11 MiB, over the 10 MiB limit.",
  );
});

test("typeRefusal says in words what can be attached", () => {
  const got = typeRefusal("application/zip", "a.zip");
  assert.equal(got.code, "unsupported_type");
  assert.equal(
    got.message,
    "Could not attach a.zip: files of this kind (application/zip) cannot be attached. You can attach images (PNG, JPEG, GIF, WebP) and text, Markdown, CSV, JSON or PDF files.",
  );
  assert.match(typeRefusal(undefined).message, /^Could not attach that file: files of this kind cannot be attached\./);
});

test("a refusal of a type names the offered file of that type, once", () => {
  const offered = [
    { name: "notes.txt", type: "text/plain" },
    { name: "a.zip", type: "application/zip" },
    { name: "b.zip", type: "application/zip" },
    { name: "blob", type: "" },
  ];
  assert.equal(takeOfferedName(offered, "application/zip"), "a.zip");
  assert.equal(takeOfferedName(offered, "application/zip"), "b.zip", "the next refusal names the next file");
  assert.equal(takeOfferedName(offered, "application/zip"), undefined);
  assert.equal(takeOfferedName(offered, undefined), "blob", "no type matches a file without one");
  assert.equal(takeOfferedName([], "image/png"), undefined);
  assert.match(typeRefusal("application/zip", "a.zip").message, /^Could not attach a\.zip: files of this kind \(application\/zip\)/);
});
