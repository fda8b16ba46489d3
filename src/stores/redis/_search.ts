import { ThreadkeepError } from "../../core/errors.js";
import type { SearchHit, SearchQuery } from "../../core/types.js";
import { parseMessages, type RedisKeys } from "./_codec.js";
import type { RedisConnection } from "./_connection.js";
import { INDEX_BATCH, type RedisIndexes } from "./_session-index.js";
import {
  checkSearchQuery,
  DEFAULT_SEARCH_LIMIT,
  rankByRelevanceInSlices,
  rankHits,
  substringHits,
  withinSeqBounds,
} from "../_util.js";
import type { SessionMessages } from "../../core/store/relevance.js";

/**
 * A substring search (or, with `ranking: "relevance"`, a BM25 ranking in code) over the owner's sessions (or one session), a batch of sessions at a time; members
 * of the owner's index found stale on the way are dropped from it.
 */
export async function searchMessages(
  db: RedisConnection,
  keys: RedisKeys,
  indexes: RedisIndexes,
  ttlMs: number,
  query: SearchQuery,
): Promise<SearchHit[]> {
  const { data: dataKeys } = keys;
  checkSearchQuery(query);
  const relevance = query.ranking === "relevance";
  if (query.mode === "fulltext" && !relevance) {
    throw new ThreadkeepError("not_supported", "The redis store has no full-text search; use substring");
  }
  const ids = query.sessionId ? [query.sessionId] : await indexes.ownedIds(query.userId);
  const hits: SearchHit[] = [];
  const searched: SessionMessages[] = [];
  const stale: string[] = [];
  for (let at = 0; at < ids.length; at += INDEX_BATCH) {
    const batch = ids.slice(at, at + INDEX_BATCH);
    const metas = await Promise.all(
      batch.map((id) => db.send<(string | null)[]>(["HMGET", dataKeys(id)[0], "userId", "lastActivityAt"])),
    );
    const now = Date.now();
    // A session past its TTL (its keys kept for the margin) is searched as little as a missing one, and
    // so is one inactive since before the query's activeSince.
    const since = Math.max(query.activeSince ?? -Infinity, ttlMs > 0 ? now - ttlMs : -Infinity);
    const mine = batch.filter((_, i) => metas[i][0] === query.userId && !(Number(metas[i][1]) < since));
    // Members of the owner's index that are gone, or whose id now belongs to someone else.
    if (!query.sessionId) stale.push(...batch.filter((_, i) => metas[i][0] !== query.userId));
    const lists = await Promise.all(mine.map((id) => db.send<string[]>(["LRANGE", dataKeys(id)[1], "0", "-1"])));
    mine.forEach((sessionId, i) => {
      const messages = withinSeqBounds(parseMessages(sessionId, lists[i]), query);
      if (relevance) searched.push({ sessionId, messages });
      else hits.push(...substringHits(sessionId, messages, query.text));
    });
  }
  await indexes.dropFromOwner(query.userId, stale);
  if (relevance) return rankByRelevanceInSlices(searched, query.text, query.limit ?? DEFAULT_SEARCH_LIMIT);
  return rankHits(hits, query.limit ?? DEFAULT_SEARCH_LIMIT);
}
