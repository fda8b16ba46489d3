import { describe, expect, it } from "vitest";
import { ThreadkeepError } from "../core/errors.js";
import { UpstreamError } from "../llm/openai-compatible.js";
import { errorType, toHttpFailure } from "./errors.js";

describe("toHttpFailure", () => {
  it("passes an upstream error's status and OpenAI body through", () => {
    const body = { error: { message: "nope", type: "invalid_request_error", code: "x" } };
    expect(toHttpFailure(new UpstreamError(422, body, "nope"))).toMatchObject({ status: 422, body });
    expect(toHttpFailure(new UpstreamError(500, "<html>oops</html>", "oops"))).toMatchObject({
      status: 500,
      body: { error: { code: "upstream_error", message: "<html>oops</html>" } },
    });
    expect(toHttpFailure(new UpstreamError(0, null, "unreachable"))).toMatchObject({
      status: 502,
      code: "upstream_error",
    });
  });

  it("maps coded errors to their table status, naming the field", () => {
    const error = new ThreadkeepError("invalid_message", "messages[2].role: bad", {
      details: { index: 2, field: "role" },
    });
    expect(toHttpFailure(error)).toMatchObject({
      status: 400,
      body: { error: { code: "invalid_message", param: "messages[2].role", type: "invalid_request_error" } },
    });
  });

  it("hides unknown errors behind an opaque 500", () => {
    expect(toHttpFailure(new Error("db password is hunter2"))).toEqual({
      status: 500,
      code: "internal_error",
      unexpected: true,
      body: { error: { message: "Internal server error", type: "server_error", code: "internal_error" } },
    });
  });

  it("names OpenAI error types by status", () => {
    expect([400, 401, 404, 429, 500, 503].map(errorType)).toEqual([
      "invalid_request_error",
      "authentication_error",
      "invalid_request_error",
      "rate_limit_error",
      "server_error",
      "server_error",
    ]);
  });
});
