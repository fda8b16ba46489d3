/** The contracts of the service routes app.ts adds: health, readiness, metrics and this document. */
import { AnyObject, ok } from "./schemas.js";
import { defineRoute } from "./route.js";

/** GET /healthz, /readyz, /metrics and /openapi.json. */
export const serviceContracts = {
  health: defineRoute({
    method: "GET",
    url: "/healthz",
    summary: "The process is up",
    open: true,
    responses: { "200": ok("Up") },
  }),
  ready: defineRoute({
    method: "GET",
    url: "/readyz",
    summary: "The store is reachable",
    open: true,
    responses: {
      "200": ok(
        'Ready: `status` is `ok`, or `degraded` with `storageFull: { since, error }` while the store refuses writes for want of space (turns are answered `not-saved`); a store that says which index its semantic search of a large owner uses adds `vectorIndex` (PostgreSQL: `{ kind: "pgvector-hnsw" | "ivf-sql" | "exact", pgvector: version or why it is not used }`; SQLite: `{ kind: "ivf-sqlite-vec", build: "worker thread" | "calling thread" }` or `{ kind: "exact" }`)',
      ),
      "503": ok("Store unavailable", AnyObject),
    },
  }),
  metrics: defineRoute({
    method: "GET",
    url: "/metrics",
    summary: "Prometheus metrics",
    open: true,
    responses: { "200": { description: "Text exposition 0.0.4", media: ["text/plain"] } },
  }),
  openApi: defineRoute({
    method: "GET",
    url: "/openapi.json",
    summary: "This document",
    open: true,
    responses: { "200": ok("OpenAPI 3.1") },
  }),
};
