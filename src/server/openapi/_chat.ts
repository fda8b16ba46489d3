/** The OpenAPI path of the OpenAI-compatible chat endpoint (/v1/chat/completions). */
import { body, error, json, operations, ref, sessionFailures } from "./_schemas.js";

const op = operations(sessionFailures);

/** Path of /v1/chat/completions. */
export const chatPaths = {
  "/v1/chat/completions": {
    post: op(
      "OpenAI chat completion with memory",
      {
        "200": {
          description:
            "The upstream's completion as-is (or, with stream: true, its Server-Sent Events). Headers: X-Session-ID (not on a passed-through request); X-Threadkeep-Pass-Through (temporary, or a side request's kind) on a request answered without a session; X-Threadkeep-Warning (context-unavailable, not-saved, save-unconfirmed, history-omitted, input-truncated) when degraded or cut; Idempotent-Replayed on a replay; the upstream's Retry-After, X-RateLimit-* and X-Request-Id.",
          headers: {
            "X-Session-ID": { schema: ref("SessionId") },
            "X-Threadkeep-Pass-Through": {
              schema: {
                type: "string",
                enum: ["temporary", "title", "tags", "follow_ups", "queries", "autocomplete", "emoji", "image_prompt", "function_calling", "moa", "other"],
              },
            },
            "X-Threadkeep-Warning": {
              schema: { type: "string", enum: ["context-unavailable", "not-saved", "save-unconfirmed", "history-omitted", "input-truncated"] },
            },
          },
          content: { ...json({ type: "object" }), "text/event-stream": { schema: { type: "string" } } },
        },
        "413": error("Body larger than the limit (`payload_too_large`)"),
        "415": error("Content-Type is not application/json (`unsupported_media_type`)"),
        "429": error(
          "Waited too long for earlier turns of the session (`session_busy`), or over a fair-share limit (`too_many_concurrent_turns`, `rate_limited`, with Retry-After)",
        ),
        "502": error(
          "Upstream unreachable (`upstream_error`); an upstream error status is passed through with its body",
        ),
        "504": error("The upstream stayed silent past the upstream timeout (`upstream_timeout`)"),
      },
      {
        description:
          "The new turn is the request's messages after its last assistant message (a new session adopts the whole conversation). System and developer messages are sent, not stored. A temporary chat (`local:` id) and a front-end's background task (Open WebUI's title, tags, follow-ups, queries, autocomplete, emoji, image prompt and tool selection prompts, LibreChat's title prompt, or any request with X-Threadkeep-Task) are passed to the upstream as sent and not stored.",
        parameters: [
          {
            name: "X-Session-ID",
            in: "header",
            schema: ref("SessionId"),
            description: "The conversation; else X-OpenWebUI-Chat-Id, else X-Conversation-Id (the order is `serve --session-headers`); a new session when none holds a value.",
          },
          {
            name: "X-OpenWebUI-Chat-Id",
            in: "header",
            schema: { type: "string" },
            description: "Open WebUI's chat id (ENABLE_FORWARD_USER_INFO_HEADERS). A UUID is the session id; another id maps to a UUID v5 of it; `local:…` is a temporary chat.",
          },
          {
            name: "X-Conversation-Id",
            in: "header",
            schema: { type: "string" },
            description: "LibreChat's conversation id ({{LIBRECHAT_BODY_CONVERSATIONID}}), read as X-OpenWebUI-Chat-Id.",
          },
          {
            name: "X-Threadkeep-Task",
            in: "header",
            schema: { type: "string" },
            description: "The request's background task (e.g. Open WebUI's {{TASK}}: title_generation); empty on a chat turn. A task is answered and not stored.",
          },
          {
            name: "X-Threadkeep-Client",
            in: "header",
            schema: { type: "string", enum: ["whole-history", "thin"] },
            description: "How the client sends history: the whole conversation every time, or only the new turn.",
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
