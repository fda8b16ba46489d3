import type { Message, SearchHit, SearchQuery } from "../../core/types.js";
import { RELEVANCE_SLICE_MS, type SessionMessages } from "../../core/store/relevance.js";
import type { SqliteStoreDb } from "./_db.js";
import { scopedMatch } from "./_fulltext.js";
import type { MessageRow } from "./_rows.js";
import type { SearchReader } from "./_search-reader.js";
import type { SearchStatement } from "./_search-statements.js";
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
 * is indexed, so neither indexes a row twice.
 *
 * The step that finds nothing left waiting searches in the same synchronous call, so a message written
 * between the steps is indexed before the search reads the index. A search that may read more than
 * {@link THREAD_SPAN} seqs (of one session, or of all the owner's) is read on `reader`'s thread instead
 * (`sqlite/_search-reader.ts`), after that step's commit, so it sees as much.
 */
export async function searchMessages(
  use: <T>(fn: (db: SqliteStoreDb) => T) => T,
  query: SearchQuery,
  limit: number,
  reader?: SearchReader,
): Promise<SearchHit[]> {
  const plan = planSearch(query, limit);
  // Nothing but separators: no word to find.
  if (!plan) return [];
  // Relevance ranks full text in any mode: any of the words, best first.
  const fullText = query.mode === "fulltext" || query.ranking === "relevance";
  const scope = { userId: query.userId, sessionId: query.sessionId };
  for (;;) {
    const found = use((db): SearchHit[] | SessionMessages | SearchPlan | undefined => {
      if (fullText && !indexedBelow(db, query) && db.tx.indexPending(SEARCH_INDEX_CHUNK_ROWS, scope)) return undefined;
      if (reader && spanOf(db, plan, query) > THREAD_SPAN) return plan;
      const rows = db.st[plan.name].all(...plan.args);
      return plan.ranked
        ? { sessionId: query.sessionId!, messages: db.messages(query.sessionId!, rows) }
        : hits(db, rows, plan.needle);
    });
    if (!found) {
      await new Promise((resolve) => setImmediate(resolve));
      continue;
    }
    if (Array.isArray(found)) return found;
    if ("messages" in found) return rankSessionMatches(found, query.text, limit);
    // On the search thread, or on the store's connection when the thread cannot serve.
    const rows = (await reader!.rows(plan.name, plan.args)) ?? use((db) => db.st[plan.name].all(...plan.args));
    if (!plan.ranked) return use((db) => hits(db, rows, plan.needle));
    return rankSessionMatches(await parseInSteps(use, query.sessionId!, rows), query.text, limit);
  }
}

/**
 * A search's statement (`SEARCH_SQL`, `sqlite/_search-statements.ts`), its arguments, the seqs it may
 * read, and how a hit's snippet finds its anchor. `ranked`: a relevance search of one session, whose
 * every match is ranked in code ({@link rankSessionMatches}).
 */
interface SearchPlan {
  name: SearchStatement;
  args: unknown[];
  after: number;
  before: number;
  needle: (text: string) => string;
  ranked: boolean;
}

/** Seqs of a session are below 2^32 (its full-text rowids hold them in their low 32 bits). */
const SEQ_SPAN = 2 ** 32;
/**
 * Seqs a search reads on the store's thread at most, of one session or of all the owner's; a larger
 * span goes to the search thread. Every match costs ~3 µs to read and parse (a session of 50,000
 * messages that all match: ~100 ms of statement and ~45 ms of parsing), so the store's thread holds
 * ~30 ms at the most here. Below it the thread's round trip would cost more than it saves: a small
 * owner's search waits ~0.2–0.3 ms longer on it, and recall over the owner's sessions (`scope: "user"`)
 * built a LoCoMo context 1–1.5 ms later at the median.
 */
const THREAD_SPAN = 10_000;
/** Matched rows parsed per step of a large session's relevance search, the loop free between steps (~5 ms each). */
const PARSE_CHUNK_ROWS = 2_000;

/** The statement of a checked search; null when its text has no word to match. */
function planSearch(query: SearchQuery, limit: number): SearchPlan | null {
  const { userId, sessionId } = query;
  const since = query.activeSince ?? Number.MIN_SAFE_INTEGER;
  const after = query.afterSeq ?? Number.MIN_SAFE_INTEGER;
  const before = query.beforeSeq ?? Number.MAX_SAFE_INTEGER;
  if (query.mode !== "fulltext" && query.ranking !== "relevance") {
    const needle = query.text.toLowerCase();
    return {
      ...(sessionId === undefined
        ? { name: "searchSubstring", args: [userId, since, since, needle, after, before, limit] }
        : { name: "searchSubstringInSession", args: [sessionId, userId, since, since, needle, after, before, limit] }),
      after,
      before,
      needle: () => query.text,
      ranked: false,
    };
  }
  const ranked = query.ranking === "relevance";
  const match = scopedMatch(query.text, query, ranked);
  if (!match) return null;
  if (sessionId === undefined) {
    return {
      name: ranked ? "searchFullTextRanked" : "searchFullText",
      args: [match, userId, since, since, after, before, limit],
      after,
      before,
      needle: firstWordOf(query.text),
      ranked: false,
    };
  }
  if (!ranked) {
    return {
      name: "searchFullTextInSession",
      args: [match, sessionId, userId, since, since, after, before, limit],
      after,
      before,
      needle: firstWordOf(query.text),
      ranked: false,
    };
  }
  // Every match of the session between the bounds, for ranking in code. Clamped to the rowid's seq
  // part, so a bound outside it cannot reach into the next session's rowids.
  const low = Math.min(Math.max(Math.floor(query.afterSeq ?? -1), -1), SEQ_SPAN - 1);
  const high = Math.max(Math.min(Math.ceil(query.beforeSeq ?? SEQ_SPAN), SEQ_SPAN), 0);
  return {
    name: "searchFullTextAllInSession",
    args: [match, sessionId, low, sessionId, high, sessionId, userId, since, since],
    after: low,
    before: high,
    needle: firstWordOf(query.text),
    ranked: true,
  };
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

/**
 * How many seqs a search may read. Of one session: between its bounds, up to its last seq (read only
 * when the bounds alone allow more than {@link THREAD_SPAN}: recall's are within them). Of all the
 * owner's sessions: how far they are in the full-text index, which the search's steps have brought
 * up to their last seqs (summed over at most {@link THREAD_SPAN} sessions). An owner's substring
 * search reads every message, indexed or not, through a function of each: always the thread's.
 */
function spanOf(db: SqliteStoreDb, plan: SearchPlan, query: SearchQuery): number {
  if (plan.name === "searchSubstring") return Number.POSITIVE_INFINITY;
  if (query.sessionId === undefined) return db.st.ownerIndexedSeqs.get(query.userId, THREAD_SPAN) ?? 0;
  const bounded = plan.before - Math.max(plan.after, 0) - 1;
  if (bounded <= THREAD_SPAN) return bounded;
  const last = db.st.lastSeq.get(query.sessionId)?.seq ?? 0;
  return Math.min(plan.before, last + 1) - Math.max(plan.after, 0) - 1;
}

/** A large session's matched rows, parsed in steps with the loop free between them. */
async function parseInSteps(
  use: <T>(fn: (db: SqliteStoreDb) => T) => T,
  sessionId: string,
  rows: MessageRow[],
): Promise<SessionMessages> {
  const messages: Message[] = [];
  for (let at = 0; at < rows.length; at += PARSE_CHUNK_ROWS) {
    if (at > 0) await new Promise((resolve) => setImmediate(resolve));
    for (const message of use((db) => db.messages(sessionId, rows.slice(at, at + PARSE_CHUNK_ROWS)))) {
      messages.push(message);
    }
  }
  return { sessionId, messages };
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
