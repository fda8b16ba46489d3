/**
 * GET /v1/search: the caller's messages across all their sessions (or one, with `session`), in any
 * search mode. Ownership is part of the store query, so another owner's message is never read.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Memory } from "../../core/memory/memory.js";
import { MAX_NEIGHBOURS, SEARCH_MODES, SEARCH_RANKINGS, type SearchRanking } from "../../core/search.js";
import { parseBody } from "./_validate.js";

/**
 * The query of both search routes: `q`, `limit`, `mode` (`auto` picks the best the server has),
 * `ranking` (`relevance` or `recency`, for `auto`, `substring` and `fulltext`) and `neighbours` (the
 * turns after each hit to add to it).
 */
export const SearchParams = z.object({
  q: z.string().trim().min(1, "q is required"),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  mode: z.enum([...SEARCH_MODES, "auto"] as const).optional(),
  ranking: z.enum(SEARCH_RANKINGS as [SearchRanking, ...SearchRanking[]]).optional(),
  neighbours: z.coerce.number().int().min(0).max(MAX_NEIGHBOURS).optional(),
});

const GlobalSearchParams = SearchParams.extend({ session: z.string().min(1).optional() });

/** Turns after each hit a search adds when `neighbours` is not given: see docs/search (measured in bench/retrieval.ts). */
export const DEFAULT_NEIGHBOURS = 1;

/** Adds GET /v1/search. */
export function registerSearchRoutes(app: FastifyInstance, deps: { memory: Memory }): void {
  app.get("/v1/search", async (request) => {
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
