import type { Message, SearchHit, SearchQuery } from "../../core/types.js";
import { RELEVANCE_SLICE_MS, type SessionMessages } from "../../core/store/relevance.js";
import type { SqliteStoreDb } from "./_db.js";
import { scopedMatch } from "./_fulltext.js";
import type { MessageRow } from "./_rows.js";
import type { SearchReader } from "./_search-reader.js";
import type { OwnerSearch } from "./_search-statements.js";
import { messageText, rankByRelevanceInSlices, snippetOf } from "../_util.js";

/**
 * Queued messages a full-text search indexes per step (~20 ms each at ~11 s per million): larger than the background
 * indexer's steps, since a search waits for them, and each step's transaction has a fixed cost
 * (a 200,000-message backlog: ~1.5 s of CPU in steps of 2,000, ~2.1 s in steps of 500, ~1.2 s in one).
 */
const SEARCH_INDEX_CHUNK_ROWS = 2_000;

/** A message as a hit, its snippet around what `needle` finds in its text. */
const hitOf = (sessionId: string, message: Message, needle: (text: string) => string): SearchHit => {
  const text = messageText(message);
  return { sessionId, seq: message.seq, snippet: snippetOf(text, needle(text)), message };
};

const hits = (db: SqliteStoreDb, rows: MessageRow[], needle: (text: string) => string): SearchHit[] =>
  rows.flatMap((row) => db.messages(row[3]!, [row]).map((message) => hitOf(row[3]!, message, needle)));

/** The first of a full-text query's words that a text holds (the snippet's anchor), else "". */
const firstWordOf = (query: string) => {
  const words = query.toLowerCase().trim().split(/\s+/);
  return (text: string) => words.find((w) => text.toLowerCase().includes(w)) ?? "";
};

/**
 * A checked search, its limit settled: full-text or substring. `use` runs a step on the open
 * database (writing the queued appends first). A full-text search first indexes the queued text it
 * can match in bounded steps, the event loop free between them: after an upgrade the whole file
 * waits, and indexing it in one call held the loop ~11 s per million messages. Only the searched
 * owner's sessions (or the one session searched) are indexed: the query matches nothing else, and
 * another owner's backlog is the background indexer's, not a cost of this search. The background
 * indexer may run between the steps; each step is one transaction that reads how far every session
 * is indexed, so neither indexes a row twice. A search over a whole owner then runs on `reader`'s
 * thread when the store has one (`sqlite/_search-reader.ts`): its statement grows with the owner.
 */
export async function searchMessages(
  use: <T>(fn: (db: SqliteStoreDb) => T) => T,
  query: SearchQuery,
  limit: number,
  reader?: SearchReader,
): Promise<SearchHit[]> {
  const owner = reader && query.sessionId === undefined ? ownerSearch(query, limit) : undefined;
  if (owner === null) return [];
  // Relevance ranks full text in any mode: any of the words, best first.
  if (query.mode !== "fulltext" && query.ranking !== "relevance") {
    return owner ? searchOwner(use, reader!, owner) : use((db) => searchText(db, query, limit));
  }
  const scope = { userId: query.userId, sessionId: query.sessionId };
  const next = () => new Promise((resolve) => setImmediate(resolve));
  if (owner) {
    // The read on the search thread starts after the last step's commit, so it sees what was indexed.
    while (use((db) => db.tx.indexPending(SEARCH_INDEX_CHUNK_ROWS, scope))) await next();
    return searchOwner(use, reader!, owner);
  }
  const inSession = query.ranking === "relevance" && query.sessionId !== undefined;
  for (;;) {
    // The step that finds nothing left waiting searches in the same synchronous call, so a message
    // written between the steps is indexed before the search reads the index.
    const found = use((db) =>
      !indexedBelow(db, query) && db.tx.indexPending(SEARCH_INDEX_CHUNK_ROWS, scope)
        ? undefined
        : inSession
          ? sessionMatches(db, query)
          : searchText(db, query, limit),
    );
    if (found) return Array.isArray(found) ? found : rankSessionMatches(found, query.text, limit);
    await next();
  }
}

/** A search over a whole owner: the statement, its arguments, and how a hit's snippet finds its anchor. */
interface OwnerSearchPlan {
  name: OwnerSearch;
  args: unknown[];
  needle: (text: string) => string;
}

/** The statement of a search over a whole owner (no `sessionId`); null when its text has no word to match. */
function ownerSearch(query: SearchQuery, limit: number): OwnerSearchPlan | null {
  const since = query.activeSince ?? Number.MIN_SAFE_INTEGER;
  const after = query.afterSeq ?? Number.MIN_SAFE_INTEGER;
  const before = query.beforeSeq ?? Number.MAX_SAFE_INTEGER;
  if (query.mode === "fulltext" || query.ranking === "relevance") {
    const ranked = query.ranking === "relevance";
    const match = scopedMatch(query.text, query, ranked);
    // Nothing but separators: no word to find.
    if (!match) return null;
    return {
      name: ranked ? "searchFullTextRanked" : "searchFullText",
      args: [match, query.userId, since, since, after, before, limit],
      needle: firstWordOf(query.text),
    };
  }
  return {
    name: "searchSubstring",
    args: [query.userId, since, since, query.text.toLowerCase(), after, before, limit],
    needle: () => query.text,
  };
}

/**
 * Runs an owner's search on the search thread (its queued appends written first, by `use`), or on the
 * store's connection when the thread cannot serve; only the hits are parsed here.
 */
async function searchOwner(
  use: <T>(fn: (db: SqliteStoreDb) => T) => T,
  reader: SearchReader,
  { name, args, needle }: OwnerSearchPlan,
): Promise<SearchHit[]> {
  use(() => undefined);
  const rows = (await reader.rows(name, args)) ?? use((db) => db.st[name].all(...args));
  return use((db) => hits(db, rows, needle));
}

/**
 * Whether a search of one session bounded by `beforeSeq` finds everything it may match in the index
 * already: its session is indexed up to the bound. Recall's search of every turn is such a search, and
 * what waits for the index then is the newest messages, inside the window recall leaves out: indexing
 * them first was a write transaction on every turn (~0.15 ms; docs/benchmarks.md, "Proxy").
 */
function indexedBelow(db: SqliteStoreDb, query: SearchQuery): boolean {
  if (query.sessionId === undefined || query.beforeSeq === undefined) return false;
  const indexedTo = db.st.indexedTo.get(query.sessionId);
  return indexedTo !== undefined && indexedTo >= query.beforeSeq - 1;
}

/** Seqs of a session are below 2^32 (its full-text rowids hold them in their low 32 bits). */
const SEQ_SPAN = 2 ** 32;

/**
 * A session's messages that hold any of the query's words, oldest first (for {@link rankSessionMatches}),
 * within the query's seq bounds.
 */
function sessionMatches(db: SqliteStoreDb, query: SearchQuery): SessionMessages {
  const sessionId = query.sessionId!;
  const match = scopedMatch(query.text, query, true);
  if (!match) return { sessionId, messages: [] };
  const since = query.activeSince ?? Number.MIN_SAFE_INTEGER;
  // Clamped to the rowid's seq part, so a bound outside it cannot reach into the next session's rowids.
  const after = Math.min(Math.max(Math.floor(query.afterSeq ?? -1), -1), SEQ_SPAN - 1);
  const before = Math.max(Math.min(Math.ceil(query.beforeSeq ?? SEQ_SPAN), SEQ_SPAN), 0);
  return {
    sessionId,
    messages: db.messages(
      sessionId,
      db.st.searchFullTextAllInSession.all(
        match,
        sessionId,
        after,
        sessionId,
        before,
        sessionId,
        query.userId,
        since,
        since,
      ),
    ),
  };
}

/**
 * Relevance within one session (recall's query on every turn, a search of one conversation): the
 * session's matches ranked by BM25 in code, as the stores without a full-text index rank them, with
 * the session's matches as the collection. FTS5's bm25 would weigh each word by reading every row of
 * the store that holds it: the common words of a turn cost a search what the store's size does
 * (2.2 ms in a session of 200 messages among 20,000 holding them, 0.3 ms ranked here; docs/benchmarks.md,
 * "Proxy"). A match the code's tokenizer does not see (FTS5 folds diacritics, the code does not) still
 * comes back, after the ranked ones, newest first.
 */
async function rankSessionMatches(matched: SessionMessages, text: string, limit: number): Promise<SearchHit[]> {
  // The messages were parsed for this search alone: the hits may hold them without a copy.
  const ranked = await rankByRelevanceInSlices([matched], text, limit, RELEVANCE_SLICE_MS, false);
  if (ranked.length >= limit || ranked.length >= matched.messages.length) return ranked;
  const seen = new Set(ranked.map((hit) => hit.seq));
  const needle = firstWordOf(text);
  const rest = matched.messages
    .filter((message) => !seen.has(message.seq))
    .reverse()
    .slice(0, limit - ranked.length)
    .map((message) => hitOf(matched.sessionId, message, needle));
  return [...ranked, ...rest];
}

/** One synchronous search; a full-text one reads the index as it is. A ranked one is the owner's (a session's: {@link sessionMatches}). */
function searchText(db: SqliteStoreDb, query: SearchQuery, limit: number): SearchHit[] {
  const { userId, sessionId } = query;
  if (sessionId === undefined) {
    const owner = ownerSearch(query, limit);
    return owner ? hits(db, db.st[owner.name].all(...owner.args), owner.needle) : [];
  }
  const since = query.activeSince ?? Number.MIN_SAFE_INTEGER;
  const after = query.afterSeq ?? Number.MIN_SAFE_INTEGER;
  const before = query.beforeSeq ?? Number.MAX_SAFE_INTEGER;
  const { st } = db;
  if (query.mode === "fulltext" || query.ranking === "relevance") {
    const match = scopedMatch(query.text, query, query.ranking === "relevance");
    // Nothing but separators: no word to find.
    if (!match) return [];
    const rows = st.searchFullTextInSession.all(match, sessionId, userId, since, since, after, before, limit);
    return hits(db, rows, firstWordOf(query.text));
  }
  const rows = st.searchSubstringInSession.all(
    sessionId,
    userId,
    since,
    since,
    query.text.toLowerCase(),
    after,
    before,
    limit,
  );
  return hits(db, rows, () => query.text);
}
