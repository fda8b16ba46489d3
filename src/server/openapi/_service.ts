/** The OpenAPI paths of the service endpoints: health, readiness, metrics, the inspector page and this document. */
import { error, ok, sessionId } from "./_schemas.js";

const inspectorPage = {
  summary: "The inspector web page (static; it reads the API with the key the user enters)",
  security: [],
  responses: { "200": { description: "HTML", content: { "text/html": { schema: { type: "string" } } } } },
};

/** Paths of /healthz, /readyz, /metrics, /ui and /openapi.json. */
export const servicePaths = {
  "/healthz": {
    get: { summary: "The process is up", security: [], responses: { "200": ok("Up", { type: "object" }) } },
  },
  "/readyz": {
    get: {
      summary: "The store is reachable",
      security: [],
      responses: {
        "200": ok(
          "Ready: `status` is `ok`, or `degraded` with `storageFull: { since, error }` while the store refuses writes for want of space (turns are answered `not-saved`)",
          { type: "object" },
        ),
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
  "/ui": { get: inspectorPage },
  "/ui/": { get: inspectorPage },
  "/ui/memories": { get: { ...inspectorPage, summary: "The inspector's Memories view: the caller's memories (docs/inspector.md)" } },
  "/ui/s/{id}": { get: { ...inspectorPage, parameters: [sessionId] } },
  "/ui/s/{id}/{view}": {
    get: {
      ...inspectorPage,
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
};
