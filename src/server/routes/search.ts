/**
 * GET /v1/search: the caller's messages across all their sessions (or one, with `session`), in any
 * search mode. Ownership is part of the store query, so another owner's message is never read.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Memory } from "../../core/memory/memory.js";
import { parseBody } from "./_validate.js";
import { DEFAULT_NEIGHBOURS, SearchParams } from "../queries.js";

const GlobalSearchParams = SearchParams.extend({ session: z.string().min(1).optional() });

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
