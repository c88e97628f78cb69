import { test } from "node:test";
import assert from "node:assert/strict";
import { ApiError } from "../lib/api";
import { describeError, withoutIds } from "../lib/errors";
import { backoff, isOutage } from "../lib/outage";

const ID = "0b8f0d6e-2f7c-4c1e-9d55-3a1e0f2b7c11";

test("a refusal of the service is said in words, never with the ids it names", () => {
  const cases: [ApiError, RegExp][] = [
    [new ApiError(422, "invalid_fork", `message ${ID} does not wait for tool results or approvals`, null), /moved on/],
    [new ApiError(404, "not_found", `thread ${ID} not found`, null), /no longer exists/],
    [new ApiError(400, "invalid_request", `tool call ${ID} (clock) waits for an approval`, null), /refused the request: tool call … \(clock\)/],
    [new ApiError(418, "teapot", `id ${ID}`, null), /^id …$/],
    [new ApiError(500, "internal", `boom ${ID}`, null), /^The service failed\.$/],
  ];
  for (const [err, want] of cases) {
    const got = describeError(err);
    assert.equal(got.code, err.code);
    assert.match(got.message, want);
    assert.doesNotMatch(got.message, /[0-9a-f]{8}-[0-9a-f]{4}/i, `${err.code}: ${got.message}`);
  }
  assert.match(describeError(new TypeError("Failed to fetch")).message, /Could not reach Threadline/);
  assert.equal(withoutIds(`a ${ID.toUpperCase()} b`), "a … b");
});

test("an unreachable service is an outage, asked again later and later; a refusal is not", () => {
  assert.equal(isOutage(new ApiError(502, "bad_gateway", "connect ECONNREFUSED 127.0.0.1:8080", null)), true);
  assert.equal(isOutage(new ApiError(503, "unavailable", "down", null)), true);
  assert.equal(isOutage(new TypeError("Failed to fetch")), true);
  assert.equal(isOutage(new ApiError(422, "invalid_fork", "no", null)), false);
  assert.equal(isOutage(new ApiError(500, "internal", "bug", null)), false);
  const waits = [0, 1, 2, 3, 10, 50].map(backoff);
  for (let i = 1; i < waits.length; i++) assert.ok(waits[i]! >= waits[i - 1]!, `backoff grows: ${waits.join(", ")}`);
  assert.ok(waits[0]! > 0 && waits.at(-1)! <= 15_000, `backoff bounded: ${waits.join(", ")}`);
});
