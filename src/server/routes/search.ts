/**
 * GET /v1/search: the caller's messages across all their sessions (or one, with `session`), in any
 * search mode. Ownership is part of the store query, so another owner's message is never read.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Memory } from "../../core/memory/memory.js";
import { parseBody } from "./_validate.js";
import { DEFAULT_NEIGHBOURS, SEARCH_NOTES, SearchParams } from "../queries.js";
import { addRoute } from "../openapi/route.js";
import { listOf, ok, SearchHit, sessionFailures, withFailures } from "../openapi/schemas.js";

const GlobalSearchParams = SearchParams.extend({ session: z.string().min(1).optional() });

/** The contract of GET /v1/search. */
export const searchContract = withFailures(sessionFailures)({
  method: "GET",
  url: "/v1/search",
  summary: "Search the caller's messages across all their sessions",
  query: GlobalSearchParams,
  notes: {
    ...SEARCH_NOTES,
    mode: "auto (the default): hybrid with embeddings, else any-word BM25 relevance ranking",
    session: "Only this session",
  },
  responses: {
    "200": ok(
      "Hits, best first (auto, relevance, semantic, hybrid) or newest first (substring, fulltext)",
      listOf(SearchHit),
    ),
  },
});

/** Adds GET /v1/search. */
export function registerSearchRoutes(app: FastifyInstance, deps: { memory: Memory }): void {
  addRoute(app, searchContract, async (request) => {
    const query = parseBody(GlobalSearchParams, request.query);
    const mode = query.mode ?? "auto";
    const hits = await deps.memory.search(query.q, {
      userId: request.userId,
      sessionId: query.session,
      limit: query.limit,
      mode,
      ranking: query.ranking,
      neighbours: query.neighbours ?? DEFAULT_NEIGHBOURS,
    });
    return { data: hits };
  });
}
