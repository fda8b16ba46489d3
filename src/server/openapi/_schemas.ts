/** The component schemas of the OpenAPI document (see openapi.ts). */

/** A reference to a component schema. */
export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** Building blocks of the path descriptions. */
export const json = (schema: unknown) => ({ "application/json": { schema } });
export const ok = (description: string, schema: unknown = { type: "object" }) => ({ description, content: json(schema) });
export const error = (description: string) => ({ description, content: json(ref("Error")) });
export const body = (schema: unknown) => ({ requestBody: { required: true, content: json(schema) } });

/** An operation builder that adds `failures` to every operation's responses. */
export const operations =
  (failures: Record<string, unknown>) =>
  (summary: string, responses: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    summary,
    ...extra,
    responses: { ...responses, ...failures },
  });

/** The path parameter of a session id. */
export const sessionId = { name: "id", in: "path", required: true, schema: ref("SessionId") };

/** A query parameter. */
export const query = (name: string, schema: unknown, description: string, required = false) => ({
  name,
  in: "query",
  required,
  schema,
  description,
});

/** The failures every chat and session operation can answer with. */
export const sessionFailures = {
  "400": error(
    "Invalid request, message, session id or end user (`invalid_request`, `invalid_message`, `invalid_session_id`, `invalid_user`)",
  ),
  "401": error("Missing or unknown API key (`invalid_api_key`), or a bad end-user token (`invalid_user_token`)"),
  "403": error("`X-Threadkeep-User` sent with a key that is not an operator key (`operator_only`)"),
  "404": error("No such session for this user (`session_not_found`)"),
  "503": error("The store is unavailable (`store_unavailable`), or its database refused the turn lease (`store_misconfigured`)"),
};

/** Shapes shared by the routes: sessions, messages, state, preferences, errors. */
export const schemas = {
  SessionId: {
    type: "string",
    description: "A UUID, or user_{uuid}_conv_{uuid}",
    examples: ["3f2b8c1e-6d1a-4c3e-9f7a-2b9d8e1c0a55"],
  },
  Error: {
    type: "object",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["message", "type", "code"],
        properties: {
          message: { type: "string" },
          type: { type: "string" },
          code: { type: "string" },
          param: { type: ["string", "null"] },
        },
      },
    },
  },
  ChatMessage: {
    type: "object",
    required: ["role"],
    properties: {
      role: { type: "string", enum: ["system", "developer", "user", "assistant", "tool"] },
      content: { type: ["string", "array", "null"] },
      name: { type: "string" },
      tool_calls: { type: "array", items: { type: "object" } },
      tool_call_id: { type: "string" },
      metadata: { type: "object" },
    },
    additionalProperties: true,
  },
  Message: {
    allOf: [
      ref("ChatMessage"),
      {
        type: "object",
        properties: {
          seq: { type: "integer" },
          createdAt: { type: "integer" },
          incomplete: { type: "boolean" },
        },
      },
    ],
  },
  Session: {
    type: "object",
    properties: {
      id: ref("SessionId"),
      userId: { type: "string" },
      createdAt: { type: "integer" },
      lastActivityAt: { type: "integer" },
      metadata: { type: "object" },
    },
  },
  SessionPage: {
    type: "object",
    properties: {
      data: { type: "array", items: ref("Session") },
      nextCursor: { type: ["string", "null"] },
      hasMore: { type: "boolean" },
      store: { type: "string", description: "With overview=true: the store's name." },
    },
  },
  SessionState: {
    type: "object",
    properties: { version: { type: "integer" }, data: { type: "object" } },
  },
  SearchHit: {
    type: "object",
    properties: {
      sessionId: { type: "string" },
      seq: { type: "integer" },
      snippet: { type: "string" },
      message: ref("Message"),
      score: { type: "number", description: "semantic: cosine similarity; hybrid: fused reciprocal-rank score" },
      neighbours: {
        type: "array",
        description: "the turns after the hit in its session (`neighbours`), oldest first",
        items: {
          type: "object",
          properties: { seq: { type: "integer" }, role: { type: "string" }, content: { type: "string" } },
        },
      },
    },
  },
  ContextPreferences: {
    type: "object",
    additionalProperties: false,
    properties: {
      maxRecentMessages: { type: "integer", minimum: 1, maximum: 1000 },
      focusRange: {
        type: "object",
        description: "Inclusive, at most 200 messages",
        properties: { fromSeq: { type: "integer", minimum: 1 }, toSeq: { type: "integer", minimum: 1 } },
        required: ["fromSeq", "toSeq"],
        additionalProperties: false,
      },
      includeSummaries: { type: "boolean" },
      pinnedSeqs: { type: "array", items: { type: "integer", minimum: 1 }, maxItems: 50 },
      memories: { type: "boolean", description: "false leaves the user's memories out of the context" },
      memoryIds: { type: "array", items: { type: "string", minLength: 1, maxLength: 200 }, maxItems: 50, description: "Memories to include first" },
      sticky: { type: "boolean" },
      recallTopic: { type: "string", minLength: 1, maxLength: 500 },
      recallScope: { type: "string", enum: ["session", "user"], description: "user: also recall from the owner's other sessions" },
    },
  },
  Summary: {
    type: "object",
    properties: {
      id: { type: "integer" },
      fromSeq: { type: "integer" },
      toSeq: { type: "integer" },
      content: { type: "string" },
      createdAt: { type: "integer" },
      metadata: { type: "object" },
    },
  },
  AssembledContext: {
    type: "object",
    properties: {
      messages: { type: "array", items: ref("ChatMessage") },
      tokens: { type: "integer" },
      includedSeqs: { type: "array", items: { type: "integer" } },
      includedSummaryIds: { type: "array", items: { type: "integer" } },
      omitted: {
        type: "object",
        properties: {
          messages: { type: "integer" },
          tokens: { type: "integer" },
          summaries: { type: "integer" },
          truncated: { type: "integer" },
          reasons: {
            type: "object",
            description: "Stored messages left out, by reason; they add up to `messages`.",
            properties: { window: { type: "integer" }, budget: { type: "integer" }, toolPairs: { type: "integer" } },
          },
          summaryTokens: { type: "integer" },
          input: { type: "integer", description: "Input tool results dropped: no call in the request answers them." },
          seqs: {
            type: "object",
            description: "The stored messages left out, by seq, per reason.",
            properties: {
              window: { type: "array", items: { type: "integer" } },
              budget: { type: "array", items: { type: "integer" } },
              toolPairs: { type: "array", items: { type: "integer" } },
            },
          },
          truncatedSeqs: { type: "array", items: { type: "integer" }, description: "Stored messages sent cut to fit." },
        },
      },
      parts: {
        type: "object",
        description: "Tokens per part; they add up to `tokens`.",
        properties: Object.fromEntries(
          ["system", "summary", "stateNote", "history", "input", "priming"].map((k) => [k, { type: "integer" }]),
        ),
      },
      window: { type: "integer", description: "The message window applied." },
      tokenBudget: { type: "integer" },
      encoding: { type: "string", description: "Tokenizer encoding used for counting, e.g. o200k_base." },
      stateNote: { type: "string", description: "The state note included in `messages`, if any." },
    },
  },
} as const;
