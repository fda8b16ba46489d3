/**
 * The OpenAPI 3.1 description of every route, served at GET /openapi.json. Generated from the
 * routes' contracts (route.ts): the zod schemas the handlers read requests with, and what each
 * contract says of its answers.
 */
import { mcpContracts } from "../mcp/http.js";
import { branchContracts } from "../routes/branches.js";
import { chatCompletionsContract } from "../routes/chat-completions.js";
import { conversationContracts } from "../routes/conversations.js";
import { inspectorContracts } from "../routes/inspector.js";
import { memoryContracts } from "../routes/memories.js";
import { modelContracts } from "../routes/models.js";
import { responseContracts } from "../routes/responses/index.js";
import { searchContract } from "../routes/search.js";
import { sessionActionContracts } from "../routes/session-actions.js";
import { sessionContracts } from "../routes/sessions.js";
import { serviceContracts } from "./_service.js";
import { describeRoutes, type RouteContract } from "./route.js";

/** Every route's contract, in the document's order. */
export const routeContracts: readonly RouteContract[] = [
  chatCompletionsContract,
  ...Object.values(sessionContracts),
  searchContract,
  ...Object.values(sessionActionContracts),
  ...Object.values(memoryContracts),
  ...Object.values(mcpContracts),
  ...Object.values(responseContracts),
  ...Object.values(conversationContracts),
  ...Object.values(modelContracts),
  ...Object.values(branchContracts),
  ...Object.values(serviceContracts),
  ...Object.values(inspectorContracts),
];

const { paths, schemas } = describeRoutes(routeContracts);

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
  paths,
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
};
