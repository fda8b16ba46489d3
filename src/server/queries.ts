/**
 * Request query schemas that the REST routes and the MCP tools share, so a search or a page of
 * messages takes the same parameters, defaults and limits however it is asked.
 */
import { z } from "zod";
import { MAX_NEIGHBOURS, SEARCH_MODES, SEARCH_RANKINGS, type SearchRanking } from "../core/search.js";

const count = (max: number, fallback: number) => z.coerce.number().int().min(1).max(max).default(fallback);

/** Paging of a session listing (`limit`, `cursor`); also the MCP `list_sessions` input. */
export const ListQuery = z.object({ limit: count(1000, 50), cursor: z.string().min(1).optional() });

/** A page of messages (`after` a seq, at most `limit`); also the MCP `read_messages` input. */
export const MessagesQuery = z.object({ after: z.coerce.number().int().min(0).default(0), limit: count(1000, 100) });

/**
 * The query of both search routes and the MCP `search` tool: `q`, `limit`, `mode` (`auto` picks the
 * best the server has), `ranking` (`relevance` or `recency`, for `auto`, `substring` and `fulltext`)
 * and `neighbours` (the turns after each hit to add to it).
 */
export const SearchParams = z.object({
  q: z.string().trim().min(1, "q is required"),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  mode: z.enum([...SEARCH_MODES, "auto"] as const).optional(),
  ranking: z.enum(SEARCH_RANKINGS as [SearchRanking, ...SearchRanking[]]).optional(),
  neighbours: z.coerce.number().int().min(0).max(MAX_NEIGHBOURS).optional(),
});

/** Turns after each hit a search adds when `neighbours` is not given (measured in bench/retrieval.ts). */
export const DEFAULT_NEIGHBOURS = 1;

/** What the document says of the search parameters, on both search routes. */
export const SEARCH_NOTES = {
  q: "Text to find",
  limit: "Most hits",
  ranking:
    "relevance: any word, best first (BM25; the default of auto); recency: newest first (the default of substring and fulltext)",
  neighbours: `Turns after each hit added to it (default ${DEFAULT_NEIGHBOURS})`,
};
