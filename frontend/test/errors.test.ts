import { test } from "node:test";
import assert from "node:assert/strict";
import { ApiError } from "../lib/api";
import { describeError, withoutIds } from "../lib/errors";

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
