/**
 * The OpenAPI 3.1 description of every route, served at GET /openapi.json. Written by hand: the
 * routes validate with zod, and this document says the same in a form tools understand.
 */

import { SEARCH_MODES } from "../core/search.js";
import { branchesPaths } from "./_openapi-branches.js";
import { responsesPaths } from "./_openapi-responses.js";
import { body, error, json, ok, operations, ref, schemas } from "./_openapi-schemas.js";

const SEARCH_MODE_NAMES = [...SEARCH_MODES, "auto"];

const sessionId = { name: "id", in: "path", required: true, schema: ref("SessionId") };
const failures = {
  "400": error(
    "Invalid request, message or session id (`invalid_request`, `invalid_message`, `invalid_session_id`)",
  ),
  "401": error("Missing or unknown API key (`invalid_api_key`)"),
  "404": error("No such session for this user (`session_not_found`)"),
  "503": error("The store is unavailable (`store_unavailable`), or its database refused the turn lease (`store_misconfigured`)"),
};
const op = operations(failures);
const query = (name: string, schema: unknown, description: string, required = false) => ({
  name,
  in: "query",
  required,
  schema,
  description,
});

/** The OpenAPI document of the threadkeep server. */
export const openApiDocument = {
  openapi: "3.1.0",
  info: {
    title: "threadkeep",
    version: "0.1.0",
    description:
      "Session memory for LLM chat apps: an OpenAI-compatible chat endpoint that keeps each conversation server-side behind X-Session-ID, and a REST API over the sessions.",
  },
  servers: [{ url: "http://127.0.0.1:8787" }],
  security: [{ bearer: [] }],
  paths: {
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
          ],
        },
      ),
    },
    "/v1/search": {
      get: op(
        "Search the caller's messages across all their sessions",
        {
          "200": ok("Hits, newest first (substring, fulltext) or best first (semantic, hybrid)", {
            type: "object",
            properties: { data: { type: "array", items: ref("SearchHit") } },
          }),
        },
        {
          parameters: [
            query("q", { type: "string", minLength: 1 }, "Text to find", true),
            query("limit", { type: "integer", minimum: 1, maximum: 100, default: 20 }, "Most hits"),
            query("mode", { type: "string", enum: [...SEARCH_MODE_NAMES] }, "auto: hybrid with embeddings, else fulltext where the store has it, else substring"),
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
    "/mcp": {
      post: {
        summary: "Model Context Protocol over streamable HTTP (stateless): the caller's sessions as MCP tools and resources",
        requestBody: { required: true, content: { "application/json": { schema: { type: "object" } } } },
        responses: {
          "200": {
            description: "A JSON-RPC answer, as JSON or as a text/event-stream",
            content: { "application/json": { schema: { type: "object" } }, "text/event-stream": { schema: { type: "string" } } },
          },
        },
      },
      get: { summary: "Not offered: the endpoint is stateless (405)", responses: { "405": ok("Use POST", { type: "object" }) } },
      delete: { summary: "Not offered: the endpoint is stateless (405)", responses: { "405": ok("Use POST", { type: "object" }) } },
    },
    ...responsesPaths,
    ...branchesPaths,
    "/healthz": {
      get: { summary: "The process is up", security: [], responses: { "200": ok("Up", { type: "object" }) } },
    },
    "/readyz": {
      get: {
        summary: "The store is reachable",
        security: [],
        responses: {
          "200": ok("Ready", { type: "object" }),
          "503": ok("Store unavailable", { type: "object" }),
        },
      },
    },
    "/metrics": {
      get: {
        summary: "Prometheus metrics",
        security: [],
        responses: {
          "200": {
            description: "Text exposition 0.0.4",
            content: { "text/plain": { schema: { type: "string" } } },
          },
        },
      },
    },
    "/ui": { get: {
        summary: "The inspector web page (static; it reads the API with the key the user enters)",
        security: [],
        responses: { "200": { description: "HTML", content: { "text/html": { schema: { type: "string" } } } } },
      } },
    "/ui/": { get: {
        summary: "The inspector web page (static; it reads the API with the key the user enters)",
        security: [],
        responses: { "200": { description: "HTML", content: { "text/html": { schema: { type: "string" } } } } },
      } },
    "/ui/s/{id}": { get: { ...{
        summary: "The inspector web page (static; it reads the API with the key the user enters)",
        security: [],
        responses: { "200": { description: "HTML", content: { "text/html": { schema: { type: "string" } } } } },
      }, parameters: [sessionId] } },
    "/ui/s/{id}/{view}": {
      get: {
        ...{
        summary: "The inspector web page (static; it reads the API with the key the user enters)",
        security: [],
        responses: { "200": { description: "HTML", content: { "text/html": { schema: { type: "string" } } } } },
      },
        parameters: [sessionId, { name: "view", in: "path", required: true, schema: { type: "string", enum: ["context", "state"] } }],
      },
    },
    "/ui/assets/{file}": {
      get: {
        summary: "A file of the inspector page (script, style sheet, icon)",
        security: [],
        parameters: [{ name: "file", in: "path", required: true, schema: { type: "string" } }],
        responses: { "200": { description: "The file" }, "404": error("No such file (`not_found`)") },
      },
    },
    "/openapi.json": {
      get: {
        summary: "This document",
        security: [],
        responses: { "200": ok("OpenAPI 3.1", { type: "object" }) },
      },
    },
  },
  components: {
    securitySchemes: {
      bearer: {
        type: "http",
        scheme: "bearer",
        description: "A threadkeep API key (only when the server has API keys).",
      },
    },
    schemas,
  },
} as const;
