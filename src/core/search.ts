/**
 * Search over one owner's messages in four modes: the store's own `substring` and `fulltext`, and
 * `semantic` (nearest embeddings) and `hybrid` (full-text and vector ranks fused), which need an
 * embedder. Ownership is part of every store query (`userId`), never a filter applied afterwards.
 */
import { ThreadkeepError } from "./errors.js";
import type { FullStore, Message, SearchHit, SearchQuery } from "./types.js";
import { messageText } from "./store/helpers.js";
import { type RankingReads, rankTurnsReading } from "./ranking.js";

/** How {@link Memory.search} matches. */
export type SearchMode = "substring" | "fulltext" | "semantic" | "hybrid";

/** The modes, in a form usable at run time. */
export const SEARCH_MODES: readonly SearchMode[] = ["substring", "fulltext", "semantic", "hybrid"];

/** How `substring`/`fulltext` hits are ordered: see {@link SearchRequest.ranking}. */
export type SearchRanking = "relevance" | "recency";

/** The modes' rankings, in a form usable at run time. */
export const SEARCH_RANKINGS: readonly SearchRanking[] = ["relevance", "recency"];

/** A turn next to a hit, in the same session (see {@link SearchRequest.neighbours}). */
export interface HitNeighbour {
  seq: number;
  role: Message["role"];
  /** The message's text. */
  content: string;
}

/** A search hit, with the score it was ranked by where the mode has one. */
export interface RankedHit extends SearchHit {
  /** Cosine similarity (semantic) or fused reciprocal-rank score (hybrid). */
  score?: number;
  /**
   * The turns around the hit in its session, oldest first (only with `neighbours`): the answer to a
   * question is often the reply after the message that matched.
   */
  neighbours?: HitNeighbour[];
}

/** What a semantic search needs: the query's vector, and the store's nearest messages to it. */
export interface VectorSearcher {
  search(
    store: FullStore,
    query: { userId: string; sessionId?: string; text: string; limit: number },
  ): Promise<RankedHit[]>;
}

/** A search across one owner's sessions (or one of them). */
export interface SearchRequest {
  userId: string;
  sessionId?: string;
  text: string;
  mode: SearchMode;
  /**
   * `relevance`: any of the words may match, best match first (BM25: the store's full-text index, or a
   * ranking in code where it has none). `recency`: newest first; in `fulltext` every word must match,
   * in `substring` the whole text. Only for `substring` and `fulltext` (`semantic` and `hybrid` rank
   * by relevance). @default "recency"
   */
  ranking?: SearchRanking;
  limit: number;
  /** Adds to each hit the turns up to this many seqs after it (and, with `neighboursBefore`, before). @default 0 */
  neighbours?: number;
  /** Turns before each hit added with it. @default 0 */
  neighboursBefore?: number;
  /** Sessions last active before this are left out (see `SearchQuery.activeSince`). */
  activeSince?: number;
}

/** The most neighbouring turns a search adds on each side of a hit. */
export const MAX_NEIGHBOURS = 5;

/** The RRF constant: ranks past a few dozen add little, so one list's top hit cannot drown the other. */
export const RRF_K = 60;

/** Candidates taken from each list before fusing (more than the limit, so fusion has something to weigh). */
const FUSION_DEPTH = 50;

const hitKey = (hit: SearchHit) => `${hit.sessionId}\n${hit.seq}`;

/**
 * Reciprocal-rank fusion: each hit scores the sum of 1 / (k + rank) over the lists it appears in, so a
 * message both lists rank well beats one that only one list ranks first.
 */
export function fuseRanks(lists: readonly (readonly SearchHit[])[], limit: number, k = RRF_K): RankedHit[] {
  return reciprocalRankFusion(lists, hitKey, k)
    .map(({ item, score }): RankedHit => ({ ...item, score }))
    .sort((a, b) => (b.score ?? 0) - (a.score ?? 0) || b.seq - a.seq)
    .slice(0, limit);
}

/**
 * Reciprocal-rank fusion of ranked lists of anything `key` names (messages, memories): each item
 * scores the sum of 1 / (k + rank) over the lists it appears in. Unsorted; the item kept is the first seen.
 */
export function reciprocalRankFusion<T>(
  lists: readonly (readonly T[])[],
  key: (item: T) => string,
  k = RRF_K,
): { item: T; score: number }[] {
  const fused = new Map<string, { item: T; score: number }>();
  for (const list of lists) {
    list.forEach((item, rank) => {
      const id = key(item);
      const entry = fused.get(id) ?? { item, score: 0 };
      entry.score += 1 / (k + rank + 1);
      fused.set(id, entry);
    });
  }
  return [...fused.values()];
}

/**
 * The best mode a store (and embedder) offers: hybrid with an embedder; else full text where the store
 * has it, else substring (whose `relevance` ranking is the store's BM25 in code).
 */
export function bestSearchMode(store: FullStore, semantic: boolean): SearchMode {
  if (semantic) return "hybrid";
  return store.capabilities.fullTextSearch ? "fulltext" : "substring";
}

/**
 * The store's own lexical ranking (BM25 over any of the words), used by lexical recall: the store's full
 * text by relevance, or (where a store has none) its ranking in code (`SearchQuery.ranking`). Search
 * ranks these again in core ({@link relevanceHits}). Recall passes seq bounds (`SearchQuery.afterSeq`,
 * `beforeSeq`): only what lies outside the window and after the latest summary may be recalled.
 */
export function lexicalRanks(
  store: FullStore,
  request: SearchRequest & Pick<SearchQuery, "afterSeq" | "beforeSeq">,
  depth: number,
): Promise<SearchHit[]> {
  return store.search({
    userId: request.userId,
    sessionId: request.sessionId,
    text: request.text,
    activeSince: request.activeSince,
    afterSeq: request.afterSeq,
    beforeSeq: request.beforeSeq,
    mode: store.capabilities.fullTextSearch ? "fulltext" : "substring",
    ranking: "relevance",
    limit: depth,
  });
}

/**
 * The relevance ranking of search (`relevance`, `auto` without an embedder, and the lexical half of
 * `hybrid`): the store's BM25 candidates ranked again in core with their neighbouring turns
 * ({@link rankTurnsReading}), the same on every store. Hits as the store gives them (no score), and
 * what the ranking read.
 */
async function relevanceHits(
  store: FullStore,
  request: SearchRequest,
  limit: number,
): Promise<{ hits: SearchHit[]; reads: RankingReads }> {
  const reads = await rankTurnsReading(store, {
    userId: request.userId,
    sessionId: request.sessionId,
    text: request.text,
    limit,
    activeSince: request.activeSince,
  });
  return {
    hits: reads.turns.map(({ sessionId, seq, snippet, message }) => ({ sessionId, seq, snippet, message })),
    reads,
  };
}

/**
 * Runs a search. `hybrid` without embeddings is the lexical ranking alone (what it fuses with the
 * vectors' ranking). @throws `not_supported` for `semantic` without embeddings; `invalid_request` for
 * a `ranking` the mode does not take.
 */
export async function runSearch(
  store: FullStore,
  request: SearchRequest,
  vectors?: VectorSearcher,
): Promise<RankedHit[]> {
  const { hits, reads } = await searchHits(store, request, vectors);
  return withNeighbours(store, request, hits, reads);
}

async function searchHits(
  store: FullStore,
  request: SearchRequest,
  vectors?: VectorSearcher,
): Promise<{ hits: RankedHit[]; reads?: RankingReads }> {
  const { mode } = request;
  if (request.ranking !== undefined && mode !== "substring" && mode !== "fulltext") {
    throw new ThreadkeepError(
      "invalid_request",
      `Search mode "${mode}" ranks by relevance; ranking applies to substring and fulltext`,
      {
        details: { field: "ranking" },
      },
    );
  }
  if (request.ranking === "relevance" || (mode === "hybrid" && !vectors))
    return relevanceHits(store, request, request.limit);
  if (mode === "substring" || mode === "fulltext") {
    return {
      hits: await store.search({
        userId: request.userId,
        sessionId: request.sessionId,
        text: request.text,
        mode,
        limit: request.limit,
        activeSince: request.activeSince,
      }),
    };
  }
  if (!vectors) {
    throw new ThreadkeepError(
      "not_supported",
      `Search mode "${mode}" needs embeddings: start threadkeep with --embedding-model (or pass an embedder)`,
      { details: { field: "mode" } },
    );
  }
  const query = {
    userId: request.userId,
    sessionId: request.sessionId,
    text: request.text,
    activeSince: request.activeSince,
  };
  if (mode === "semantic") return { hits: await vectors.search(store, { ...query, limit: request.limit }) };
  const depth = Math.max(FUSION_DEPTH, request.limit);
  const [lexical, semantic] = await Promise.all([
    relevanceHits(store, request, depth),
    vectors.search(store, { ...query, limit: depth }),
  ]);
  return { hits: fuseRanks([lexical.hits, semantic], request.limit), reads: lexical.reads };
}

/** The messages from `fromSeq` to `toSeq` of a session, when the ranking read every one of those seqs. */
function readAlready(
  reads: RankingReads | undefined,
  sessionId: string,
  fromSeq: number,
  toSeq: number,
): Message[] | undefined {
  if (!reads) return undefined;
  const messages: Message[] = [];
  for (let seq = fromSeq; seq <= toSeq; seq++) {
    const message = reads.known(sessionId, seq);
    if (message === undefined) return undefined;
    if (message) messages.push(message);
  }
  return messages;
}

/**
 * Adds each hit's neighbouring turns (`request.neighbours` after, `neighboursBefore` before): what the
 * ranking read already, else one read of the other hits' ranges (`getMessageRanges`). Turns that are hits of their own
 * stay hits too.
 */
async function withNeighbours(
  store: FullStore,
  request: SearchRequest,
  hits: RankedHit[],
  reads?: RankingReads,
): Promise<RankedHit[]> {
  const after = Math.max(0, Math.floor(request.neighbours ?? 0));
  const before = Math.max(0, Math.floor(request.neighboursBefore ?? 0));
  if (hits.length === 0 || (after === 0 && before === 0)) return hits;
  // What the ranking read already, else one read of every other hit's range; a session deleted or
  // expired since the search matched it reads as empty, and the hit stands alone.
  const ranges = hits.map((hit) => readAlready(reads, hit.sessionId, Math.max(1, hit.seq - before), hit.seq + after));
  const unread = hits.flatMap((hit, i) =>
    ranges[i] ? [] : [{ i, range: { sessionId: hit.sessionId, fromSeq: hit.seq - before, toSeq: hit.seq + after } }],
  );
  if (unread.length > 0) {
    const read = await store.getMessageRanges(
      unread.map((u) => u.range),
      { userId: request.userId, activeSince: request.activeSince },
    );
    unread.forEach((u, j) => (ranges[u.i] = read[j]));
  }
  return hits.map((hit, i) => ({
    ...hit,
    neighbours: ranges[i]!.filter((m) => m.seq !== hit.seq).map((m) => ({
      seq: m.seq,
      role: m.role,
      content: messageText(m),
    })),
  }));
}
