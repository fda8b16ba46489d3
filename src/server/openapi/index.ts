/**
 * The OpenAPI 3.1 description of every route, served at GET /openapi.json. Written by hand: the
 * routes validate with zod, and this document says the same in a form tools understand.
 */

import { branchesPaths } from "./_branches.js";
import { chatPaths } from "./_chat.js";
import { responsesPaths } from "./_responses.js";
import { ok, schemas } from "./_schemas.js";
import { servicePaths } from "./_service.js";
import { sessionsPaths } from "./_sessions.js";
import { memoriesPaths } from "./_memories.js";

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
    ...chatPaths,
    ...sessionsPaths,
    ...memoriesPaths,
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
    ...servicePaths,
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
