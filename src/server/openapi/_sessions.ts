/** The OpenAPI paths of the sessions API (/v1/sessions/…, /v1/search): messages, search, context, summaries, fork, undo, export, state, preferences. */
import { MAX_NEIGHBOURS, SEARCH_MODES, SEARCH_RANKINGS } from "../../core/search.js";
import { body, error, json, ok, operations, query, ref, sessionFailures, sessionId } from "./_schemas.js";

const SEARCH_MODE_NAMES = [...SEARCH_MODES, "auto"];
const op = operations(sessionFailures);

/** Paths of /v1/sessions, /v1/sessions/{id}/… and /v1/search. */
export const sessionsPaths = {
  "/v1/sessions": {
    get: op(
      "The caller's sessions, newest activity first",
      { "200": ok("A page", ref("SessionPage")) },
      {
        parameters: [
          query("limit", { type: "integer", minimum: 1, maximum: 1000, default: 50 }, "Page size"),
          query("cursor", { type: "string" }, "nextCursor of the previous page"),
          query(
            "overview",
            { type: "string", enum: ["true", "false"] },
            "true: each session also has title (its first user message) and messageCount, and the page names the store",
          ),
        ],
      },
    ),
    post: op(
      "Create a session",
      { "201": ok("Created", ref("Session")), "200": ok("Already existed (same owner)", ref("Session")) },
      {
        requestBody: {
          required: false,
          content: json({
            type: "object",
            properties: { id: ref("SessionId"), metadata: { type: "object" } },
            additionalProperties: false,
          }),
        },
      },
    ),
  },
  "/v1/sessions/{id}": {
    get: op("A session", { "200": ok("The session", ref("Session")) }, { parameters: [sessionId] }),
    delete: op(
      "Delete a session with its messages, summaries and state",
      {
        "200": ok("Deleted", {
          type: "object",
          properties: { id: { type: "string" }, deleted: { type: "boolean" } },
        }),
      },
      { parameters: [sessionId] },
    ),
  },
  "/v1/sessions/{id}/messages": {
    get: op(
      "Messages, oldest first",
      {
        "200": ok("A page", {
          type: "object",
          properties: {
            data: { type: "array", items: ref("Message") },
            hasMore: { type: "boolean" },
            nextAfter: { type: ["integer", "null"] },
          },
        }),
      },
      {
        parameters: [
          sessionId,
          query("after", { type: "integer", minimum: 0, default: 0 }, "Only messages with seq > after"),
          query("limit", { type: "integer", minimum: 1, maximum: 1000, default: 100 }, "Page size"),
        ],
      },
    ),
    post: op(
      "Append messages without calling a model (creates the session if missing)",
      {
        "201": ok("Stored", {
          type: "object",
          properties: { data: { type: "array", items: ref("Message") } },
        }),
      },
      {
        parameters: [sessionId],
        ...body({
          type: "object",
          required: ["messages"],
          properties: { messages: { type: "array", minItems: 1, items: ref("ChatMessage") } },
        }),
      },
    ),
  },
  "/v1/sessions/{id}/search": {
    get: op(
      "Search the session's messages, newest first",
      {
        "200": ok("Hits", {
          type: "object",
          properties: { data: { type: "array", items: ref("SearchHit") } },
        }),
      },
      {
        parameters: [
          sessionId,
          query("q", { type: "string", minLength: 1 }, "Text to find", true),
          query("limit", { type: "integer", minimum: 1, maximum: 100, default: 20 }, "Most hits"),
          query(
            "mode",
            { type: "string", enum: [...SEARCH_MODE_NAMES] },
            "as for /v1/search; default substring",
          ),
          query("ranking", { type: "string", enum: [...SEARCH_RANKINGS] }, "relevance: any word, best first (BM25; the default of auto); recency: newest first (the default of substring and fulltext)"),
          query("neighbours", { type: "integer", minimum: 0, maximum: MAX_NEIGHBOURS, default: 1 }, "Turns after each hit added to it"),
        ],
      },
    ),
  },
  "/v1/search": {
    get: op(
      "Search the caller's messages across all their sessions",
      {
        "200": ok("Hits, best first (auto, relevance, semantic, hybrid) or newest first (substring, fulltext)", {
          type: "object",
          properties: { data: { type: "array", items: ref("SearchHit") } },
        }),
      },
      {
        parameters: [
          query("q", { type: "string", minLength: 1 }, "Text to find", true),
          query("limit", { type: "integer", minimum: 1, maximum: 100, default: 20 }, "Most hits"),
          query("mode", { type: "string", enum: [...SEARCH_MODE_NAMES] }, "auto: hybrid with embeddings, else any-word BM25 relevance ranking"),
          query("ranking", { type: "string", enum: [...SEARCH_RANKINGS] }, "relevance: any word, best first (BM25; the default of auto); recency: newest first (the default of substring and fulltext)"),
          query("neighbours", { type: "integer", minimum: 0, maximum: MAX_NEIGHBOURS, default: 1 }, "Turns after each hit added to it"),
          query("session", { type: "string" }, "Only this session"),
        ],
      },
    ),
  },
  "/v1/sessions/{id}/context": {
    get: op(
      "The context the next turn would send, with what was left out",
      { "200": ok("Assembled context", ref("AssembledContext")) },
      {
        parameters: [
          sessionId,
          query("model", { type: "string" }, "Model for token counting"),
          query("window", { type: "integer", minimum: 0, maximum: 1000 }, "Preview with this message window (nothing is stored)"),
          query("tokenBudget", { type: "integer", minimum: 1 }, "Preview with this token budget (nothing is stored)"),
          query("message", { type: "string", minLength: 1, maxLength: 10000 }, "Preview the turn of this user message (what recall brings back, how memories rank against it); nothing is stored"),
        ],
      },
    ),
  },
  "/v1/sessions/{id}/summaries": {
    get: op(
      "Summaries of older messages, by id",
      { "200": ok("Summaries", { type: "object", properties: { data: { type: "array", items: ref("Summary") } } }) },
      { parameters: [sessionId] },
    ),
  },
  "/v1/sessions/{id}/fork": {
    post: op(
      "Copy the session up to atSeq (default: all) into a new session of the same owner",
      { "201": ok("The new session (also in X-Session-ID)", ref("Session")) },
      {
        parameters: [sessionId],
        ...body({
          type: "object",
          properties: { atSeq: { type: "integer", minimum: 0 }, id: ref("SessionId") },
          additionalProperties: false,
        }),
      },
    ),
  },
  "/v1/sessions/{id}/undo": {
    post: op(
      "Remove the last turn: the last user message and everything after it",
      { "200": ok("Removed messages", { type: "object", properties: { data: { type: "array", items: ref("Message") } } }) },
      { parameters: [sessionId] },
    ),
  },
  "/v1/sessions/{id}/export": {
    get: op(
      "The session as threadkeep export JSONL (what `threadkeep import` reads)",
      {
        "200": {
          description: "Header line, session line, then its message, summary and state lines",
          content: { "application/x-ndjson": { schema: { type: "string" } } },
        },
      },
      { parameters: [sessionId] },
    ),
  },
  "/v1/sessions/{id}/state": {
    get: op("Session state", { "200": ok("State", ref("SessionState")) }, { parameters: [sessionId] }),
    patch: op(
      "Merge into session state (null removes a key)",
      {
        "200": ok("New state", ref("SessionState")),
        "409": error("expectedVersion did not match (`state_conflict`)"),
      },
      {
        parameters: [sessionId],
        ...body({
          type: "object",
          required: ["data"],
          properties: { data: { type: "object" }, expectedVersion: { type: "integer", minimum: 0 } },
          additionalProperties: false,
        }),
      },
    ),
  },
  "/v1/sessions/{id}/preferences": {
    put: op(
      "Set context preferences applied to the next turn(s)",
      {
        "200": ok("Stored", { type: "object", properties: { preferences: ref("ContextPreferences") } }),
      },
      { parameters: [sessionId], ...body(ref("ContextPreferences")) },
    ),
  },
};
