/**
 * The OpenAPI paths of the Responses, Conversations and models APIs. Their bodies are OpenAI's:
 * the schemas here name the fields threadkeep reads; the full shapes are those of the `openai`
 * package's `resources/responses`, `resources/conversations` and `resources/models`.
 */
import { body, error, json, ok, operations } from "./_schemas.js";

const failures = {
  "400": error("Invalid request: the `param` names the field (`invalid_request`)"),
  "401": error("Missing or unknown API key (`invalid_api_key`), or a bad end-user token (`invalid_user_token`)"),
  "404": error("No such response, conversation or item for this user (`not_found`)"),
};
const op = operations(failures);
const path = (name: string, description: string) => ({ name, in: "path", required: true, schema: { type: "string" }, description });
const page = [
  { name: "after", in: "query", schema: { type: "string" }, description: "Item id to start after" },
  { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 100, default: 20 } },
  { name: "order", in: "query", schema: { type: "string", enum: ["asc", "desc"], default: "desc" } },
];
const itemPage = {
  type: "object",
  properties: {
    object: { const: "list" },
    data: { type: "array", items: { type: "object" } },
    first_id: { type: ["string", "null"] },
    last_id: { type: ["string", "null"] },
    has_more: { type: "boolean" },
  },
};
const responseId = path("id", "resp_…");
const conversationId = path("id", "conv_… (or a session id)");
const metadata = { type: "object", additionalProperties: { type: "string", maxLength: 512 }, maxProperties: 16 };

/** Paths of /v1/responses, /v1/conversations and /v1/models. */
export const responsesPaths = {
  "/v1/responses": {
    post: op(
      "Create a response (translated to the upstream's chat completions; stream: true for Responses events)",
      {
        "200": {
          description: "A `response` object, or with stream: true its Server-Sent Events. Header X-Session-ID names the session.",
          content: { ...json({ type: "object" }), "text/event-stream": { schema: { type: "string" } } },
        },
      },
      body({
        type: "object",
        required: ["input"],
        properties: {
          model: { type: "string" },
          input: { oneOf: [{ type: "string" }, { type: "array", items: { type: "object" } }] },
          instructions: { type: ["string", "null"] },
          previous_response_id: { type: ["string", "null"] },
          conversation: { oneOf: [{ type: "string" }, { type: "object", properties: { id: { type: "string" } } }] },
          stream: { type: "boolean" },
          store: { type: "boolean", default: true },
          tools: { type: "array", items: { type: "object" }, description: "Function tools only" },
          tool_choice: {},
          parallel_tool_calls: { type: "boolean" },
          temperature: { type: "number", minimum: 0, maximum: 2 },
          top_p: { type: "number", minimum: 0, maximum: 1 },
          max_output_tokens: { type: "integer", minimum: 1 },
          text: { type: "object" },
          metadata,
          user: { type: "string" },
        },
      }),
    ),
  },
  "/v1/responses/{id}": {
    get: op("A stored response", { "200": ok("The `response` object") }, { parameters: [responseId] }),
    delete: op("Delete a response with its input and output items", { "200": ok("`{ id, object: \"response\", deleted: true }`") }, { parameters: [responseId] }),
  },
  "/v1/responses/{id}/input_items": {
    get: op("The input items of a response", { "200": ok("A page of items", itemPage) }, { parameters: [responseId, ...page] }),
  },
  "/v1/conversations": {
    post: op(
      "Create a conversation (a threadkeep session)",
      { "200": ok("The `conversation` object") },
      body({ type: "object", properties: { items: { type: "array", items: { type: "object" } }, metadata } }),
    ),
  },
  "/v1/conversations/{id}": {
    get: op("A conversation", { "200": ok("The `conversation` object") }, { parameters: [conversationId] }),
    post: op("Replace a conversation's metadata", { "200": ok("The `conversation` object") }, {
      parameters: [conversationId],
      ...body({ type: "object", required: ["metadata"], properties: { metadata } }),
    }),
    delete: op("Delete a conversation and its session", { "200": ok("`{ id, object: \"conversation.deleted\", deleted: true }`") }, { parameters: [conversationId] }),
  },
  "/v1/conversations/{id}/items": {
    get: op("A conversation's items", { "200": ok("A page of items", itemPage) }, { parameters: [conversationId, ...page] }),
    post: op("Add items to a conversation", { "200": ok("The added items", itemPage) }, {
      parameters: [conversationId],
      ...body({ type: "object", required: ["items"], properties: { items: { type: "array", minItems: 1, items: { type: "object" } } } }),
    }),
  },
  "/v1/conversations/{id}/items/{item_id}": {
    get: op("One item", { "200": ok("The item") }, { parameters: [conversationId, path("item_id", "Item id")] }),
    delete: op("Delete one item", { "200": ok("The `conversation` object") }, { parameters: [conversationId, path("item_id", "Item id")] }),
  },
  "/v1/models": {
    get: op("The upstream's models (cached for 10 s)", { "200": ok("`{ object: \"list\", data: Model[] }`"), "502": error("The upstream has no /models route (`upstream_error`)") }),
  },
  "/v1/models/{id}": {
    get: op("One of the upstream's models (URL-encode ids with slashes)", { "200": ok("A `model` object") }, { parameters: [path("id", "Model id")] }),
  },
};
