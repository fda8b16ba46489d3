/** The OpenAPI paths of memories (/v1/memories) and of erasing the caller's data (/v1/users/me). */
import { body, ok, operations, query, sessionFailures } from "./_schemas.js";

const op = operations(sessionFailures);
const memoryId = { name: "id", in: "path", required: true, schema: { type: "string", maxLength: 128 }, description: "The memory's id" };
const memory = {
  type: "object",
  properties: {
    id: { type: "string" },
    userId: { type: "string" },
    text: { type: "string" },
    createdAt: { type: "integer" },
    updatedAt: { type: "integer" },
    source: { type: "object", description: '`{ kind: "hand" }` or `{ kind: "session", sessionId, seqs }`' },
    metadata: { type: "object" },
    history: {
      type: "array",
      items: { type: "object", properties: { text: { type: "string" }, replacedAt: { type: "integer" }, reason: { type: "string" } } },
    },
  },
};
const text = { type: "string", minLength: 1, maxLength: 2000 };

/** Paths of /v1/memories and /v1/users/me. */
export const memoriesPaths = {
  "/v1/memories": {
    get: op(
      "The caller's memories: most recently updated first, or ranked by relevance to `q`",
      {
        "200": ok("A page", {
          type: "object",
          properties: { object: { const: "list" }, data: { type: "array", items: memory }, next_cursor: { type: ["string", "null"] }, has_more: { type: "boolean" } },
        }),
      },
      {
        parameters: [
          query("q", { type: "string", minLength: 1 }, "Rank by relevance to this text"),
          query("limit", { type: "integer", minimum: 1, maximum: 100, default: 20 }, "Page size"),
          query("cursor", { type: "string" }, "From a previous page's next_cursor"),
        ],
      },
    ),
    post: op("Write a memory by hand", { "201": ok("The memory", memory) }, body({ type: "object", required: ["text"], additionalProperties: false, properties: { text, metadata: { type: "object" } } })),
  },
  "/v1/memories/{id}": {
    get: op("One of the caller's memories (another user's id is 404)", { "200": ok("The memory", memory) }, { parameters: [memoryId] }),
    patch: op(
      "Correct a memory: the old text is kept in its history",
      { "200": ok("The memory", memory) },
      { parameters: [memoryId], ...body({ type: "object", additionalProperties: false, properties: { text, metadata: { type: "object" } } }) },
    ),
    delete: op(
      "Delete a memory with its history",
      { "200": ok("Deleted", { type: "object", properties: { id: { type: "string" }, deleted: { type: "boolean" } } }) },
      { parameters: [memoryId] },
    ),
  },
  "/v1/users/me": {
    delete: op(
      "Erase all of the caller's data: sessions (messages, branches, summaries, vectors, state) and memories",
      { "200": ok("What was erased", { type: "object", properties: { sessions: { type: "integer" }, memories: { type: "integer" } } }) },
    ),
  },
};
