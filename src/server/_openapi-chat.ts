/** The OpenAPI path of the OpenAI-compatible chat endpoint (/v1/chat/completions). */
import { body, error, json, operations, ref, sessionFailures } from "./_openapi-schemas.js";

const op = operations(sessionFailures);

/** Path of /v1/chat/completions. */
export const chatPaths = {
  "/v1/chat/completions": {
    post: op(
      "OpenAI chat completion with memory",
      {
        "200": {
          description:
            "The upstream's completion as-is (or, with stream: true, its Server-Sent Events). Headers: X-Session-ID; X-Threadkeep-Warning (context-unavailable, not-saved, save-unconfirmed, history-omitted, input-truncated) when degraded or cut; Idempotent-Replayed on a replay; the upstream's Retry-After, X-RateLimit-* and X-Request-Id.",
          headers: {
            "X-Session-ID": { schema: ref("SessionId") },
            "X-Threadkeep-Warning": {
              schema: { type: "string", enum: ["context-unavailable", "not-saved", "save-unconfirmed", "history-omitted", "input-truncated"] },
            },
          },
          content: { ...json({ type: "object" }), "text/event-stream": { schema: { type: "string" } } },
        },
        "413": error("Body larger than the limit (`payload_too_large`)"),
        "415": error("Content-Type is not application/json (`unsupported_media_type`)"),
        "429": error("Waited too long for earlier turns of the session (`session_busy`)"),
        "502": error(
          "Upstream unreachable (`upstream_error`); an upstream error status is passed through with its body",
        ),
      },
      {
        description:
          "The new turn is the request's messages after its last assistant message (a new session adopts the whole conversation). System and developer messages are sent, not stored.",
        parameters: [
          {
            name: "X-Session-ID",
            in: "header",
            schema: ref("SessionId"),
            description: "The conversation; a new session when absent.",
          },
          {
            name: "Idempotency-Key",
            in: "header",
            schema: { type: "string" },
            description: "A retry with the same key returns the first result (24 h, per process).",
          },
        ],
        ...body({
          type: "object",
          required: ["messages"],
          properties: {
            model: { type: "string" },
            stream: { type: "boolean" },
            messages: { type: "array", minItems: 1, items: ref("ChatMessage") },
          },
          additionalProperties: true,
        }),
      },
    ),
  },
};
