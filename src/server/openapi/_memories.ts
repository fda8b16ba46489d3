/** The OpenAPI paths of memories (/v1/memories), of who the caller is and of erasing their data (/v1/users/me). */
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
    source: {
      type: "object",
      description:
        '`{ kind: "hand" }`, or `{ kind: "session", sessionId, seqs, sessionDeleted }` for one drawn from a turn: `sessionDeleted` is true once that session is gone (deleted, expired or erased), and the memory keeps its text',
      properties: {
        kind: { enum: ["hand", "session"] },
        sessionId: { type: "string" },
        seqs: { type: "array", items: { type: "integer" } },
        sessionDeleted: { type: "boolean" },
      },
      required: ["kind"],
    },
    metadata: { type: "object" },
    history: {
      type: "array",
      items: { type: "object", properties: { text: { type: "string" }, replacedAt: { type: "integer" }, reason: { type: "string" } } },
    },
  },
};
const text = { type: "string", minLength: 1, maxLength: 2000 };

const user = {
  type: "object",
  properties: {
    object: { const: "user" },
    id: { type: "string", description: "The user the request acts as: the key's user, its end user (`<tenant>/<end user>`), or the end user an operator key opened" },
    tenant: { type: "string", description: "The API key's user" },
    operator: { type: "boolean", description: "The key is an operator key (`--api-keys key:user:operator`)" },
    canOpenUsers: { type: "boolean", description: "The key may open its tenant's end users with `X-Threadkeep-User` (an operator key, on a server with end users)" },
  },
};

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
  "/v1/users/me/export": {
    get: {
      ...op("Download all of the caller's data (sessions, messages, branches, summaries, state, memories with history) as threadkeep export JSONL, streamed", {
        "200": { description: "The export, one JSON record a line (docs/cli.md, the export format)", content: { "application/x-ndjson": { schema: { type: "string" } } } },
      }),
    },
  },
  "/v1/users/me": {
    get: op("Who the caller is: the user it acts as, its tenant, and whether its key is an operator key", { "200": ok("The user", user) }),
    delete: op(
      "Erase all of the caller's data: sessions (messages, branches, summaries, vectors, state) and memories",
      { "200": ok("What was erased", { type: "object", properties: { sessions: { type: "integer" }, memories: { type: "integer" } } }) },
    ),
  },
};
