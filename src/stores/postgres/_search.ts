/**
 * The PostgreSQL store's message search (substring and full text), one owner's sessions at a time.
 *
 * Full text goes owner first when the owner (or the one session searched) is small: their messages are
 * read through the primary key and each tsvector tested, so the cost is what the owner holds, whatever
 * the store holds. Left to itself the planner prefers, once VACUUM has filled in the GIN index's
 * statistics, to intersect the primary key with a GIN scan once per session of the owner, and a GIN
 * scan of a common word walks that word's postings across every owner: 0.6 ms became 40 ms per
 * search at 1M messages (docs/benchmarks.md). A large owner (the single "default" user of a server
 * without API keys) is better served by the GIN index, so the planner keeps that choice there.
 *
 * A message whose tsvector the background drain has not built yet (`tsv` NULL, `postgres/_indexing.ts`)
 * is matched by the tsvector computed here, so a search right after an append finds it; the GIN path
 * reaches those rows through the partial index of pending rows, which the drain keeps short.
 */
import type { Message, SearchHit, SearchQuery } from "../../core/types.js";
import { type MessageRow, searchable, toMessage } from "./_rows.js";
import type { PgSql } from "./_client.js";
import { DEFAULT_SEARCH_LIMIT, messageText, snippetOf } from "../_util.js";

/** Messages an owner (or session) may hold for full text to scan them rather than use the GIN index. */
export const OWNER_SCAN_LIMIT = 20_000;
/** Sessions read to size an owner: one more than this, and the owner counts as large anyway. */
const SIZING_SESSIONS = 1_000;

/** A snippet around the first query word the text contains (full-text hits need not hold the phrase). */
function fulltextSnippet(text: string, query: string): string {
  const lower = text.toLowerCase();
  const word = query.split(/[^\p{L}\p{N}]+/u).find((w) => w && lower.includes(w.toLowerCase()));
  return snippetOf(text, word ?? query);
}

/** A websearch query matching any of the text's words (operators in user text are dropped). */
function anyWord(text: string): string {
  return text
    .split(/[\s"()-]+/)
    .filter((w) => w && w.toLowerCase() !== "or")
    .join(" or ");
}

/**
 * True when the owner's sessions (or the one session) hold at most {@link OWNER_SCAN_LIMIT} messages,
 * counted from the sessions' last seqs (an upper bound: trimmed messages still count) over at most
 * {@link SIZING_SESSIONS} sessions, so sizing a large owner stays cheap.
 */
async function isSmallOwner(sql: PgSql, query: SearchQuery): Promise<boolean> {
  const [row] = await sql<{ sessions: number; messages: number }[]>`
    SELECT count(*)::int AS sessions, coalesce(sum(last_seq), 0)::float8 AS messages FROM (
      SELECT last_seq FROM sessions WHERE user_id = ${query.userId}
      ${query.sessionId === undefined ? sql`` : sql`AND id = ${query.sessionId}`}
      LIMIT ${SIZING_SESSIONS + 1}
    ) owned`;
  return row.sessions <= SIZING_SESSIONS && row.messages <= OWNER_SCAN_LIMIT;
}

/** A seq bound as a whole number in bigint's range: `seq > 2.5` is `seq > 2`, `seq < 2.5` is `seq < 3`. */
const wholeSeq = (bound: number, round: (n: number) => number) =>
  Math.min(Math.max(round(bound), Number.MIN_SAFE_INTEGER), Number.MAX_SAFE_INTEGER);

/**
 * The query's seq bounds on `m` (`SearchQuery.afterSeq`, `beforeSeq`), as `AND` conditions; empty
 * without them. Whole bigints, so the primary key (session, seq) serves them as a range.
 */
const seqBounds = (sql: PgSql, query: SearchQuery) =>
  sql`${query.afterSeq === undefined ? sql`` : sql`AND m.seq > ${wholeSeq(query.afterSeq, Math.floor)}::bigint`}
    ${query.beforeSeq === undefined ? sql`` : sql`AND m.seq < ${wholeSeq(query.beforeSeq, Math.ceil)}::bigint`}`;

/** Matching messages a relevance search ranks at most (the newest of them), so its cost stays bounded. */
export const RELEVANCE_CANDIDATES = 10_000;
/** BM25's parameters, as the in-code ranking of the other stores (core/store/relevance.ts). */
const K1 = 1.2;
const B = 0.75;

/**
 * A relevance search: BM25 over any of the query's lexemes (the configuration's stemming and
 * stopwords). `ts_rank` has no IDF, so a word in every message weighs as much as a rare name; here
 * each lexeme's document frequency, N and the average length (distinct lexemes) are the owner's, read
 * from the term statistics kept as messages are indexed and deleted (schema version 19,
 * `migrations/019-term-stats.ts`) rather than counted over the owner's messages per query. Messages
 * still pending (not yet indexed, so not yet counted) among the candidates are added to the counts.
 * The candidates are the owner's messages holding a query lexeme, the newest
 * {@link RELEVANCE_CANDIDATES}: read owner first for a small owner, through the GIN index for a large
 * one (as {@link searchMessages}); only the `limit` best are read whole (with `query.around`, each with
 * its neighbours in the same statement: see `SearchHit.around`).
 */
async function searchRelevance(sql: PgSql, lang: string, query: SearchQuery, limit: number): Promise<SearchHit[]> {
  const tsv = sql`coalesce(m.tsv, to_tsvector(${lang}::regconfig, left(m.search_text, 100000)))`;
  const owned = sql`s.user_id = ${query.userId}
    ${query.sessionId === undefined ? sql`` : sql`AND s.id = ${query.sessionId}`}
    ${query.activeSince === undefined ? sql`` : sql`AND s.last_activity_at >= ${Math.ceil(query.activeSince)}`}`;
  // Both ways of finding the candidates, each behind a one-time filter on the owner's size (the
  // sizing of isSmallOwner, here in the statement: one round trip instead of two).
  const candidates = sql`(SELECT m.session_id, m.seq, m.created_at, m.v, m.pending FROM sessions s CROSS JOIN q
        CROSS JOIN LATERAL (SELECT m.session_id, m.seq, m.created_at, ${tsv} AS v, m.tsv IS NULL AS pending FROM messages m
          WHERE m.session_id = s.id ${seqBounds(sql, query)} AND ts_match_vq(${tsv}, q.any) OFFSET 0) m
        WHERE ${owned} AND (SELECT small FROM sizing)
        ORDER BY m.created_at DESC LIMIT ${RELEVANCE_CANDIDATES})
      UNION ALL
      (SELECT m.session_id, m.seq, m.created_at, ${tsv} AS v, m.tsv IS NULL AS pending FROM messages m JOIN sessions s ON s.id = m.session_id CROSS JOIN q
        WHERE ${owned} AND NOT (SELECT small FROM sizing) ${seqBounds(sql, query)}
        AND (m.tsv @@ q.any OR (m.tsv IS NULL AND to_tsvector(${lang}::regconfig, left(m.search_text, 100000)) @@ q.any))
        ORDER BY m.created_at DESC LIMIT ${RELEVANCE_CANDIDATES})`;
  // Only the best `limit` are read whole; with `around`, each with its neighbours (one row a message,
  // the hit's own among them), so a caller that ranks them again reads nothing more.
  const around = Math.max(0, Math.floor(query.around ?? 0));
  const alone = sql`SELECT m.session_id, m.seq, m.created_at, m.body FROM scores sc
    JOIN messages m ON m.session_id = sc.session_id AND m.seq = sc.seq
    ORDER BY sc.score DESC, sc.created_at DESC, sc.seq DESC`;
  const withAround = sql`SELECT sc.session_id, sc.seq AS hit_seq, m.seq, m.created_at, m.body FROM scores sc
    JOIN messages m ON m.session_id = sc.session_id AND m.seq BETWEEN sc.seq - ${around} AND sc.seq + ${around}
    ORDER BY sc.score DESC, sc.created_at DESC, sc.seq DESC, m.seq`;
  const rows = await sql<(MessageRow & { session_id: string; hit_seq?: number })[]>`
    WITH q AS MATERIALIZED (
      SELECT websearch_to_tsquery(${lang}::regconfig, ${anyWord(query.text)}) AS any,
        tsvector_to_array(to_tsvector(${lang}::regconfig, ${query.text})) AS lexemes
    ),
    sizing AS MATERIALIZED (
      SELECT count(*) <= ${SIZING_SESSIONS} AND coalesce(sum(last_seq), 0) <= ${OWNER_SCAN_LIMIT} AS small FROM (
        SELECT last_seq FROM sessions WHERE user_id = ${query.userId}
        ${query.sessionId === undefined ? sql`` : sql`AND id = ${query.sessionId}`}
        LIMIT ${SIZING_SESSIONS + 1}
      ) owned
    ),
    candidates AS MATERIALIZED (${candidates}),
    -- Only the query's lexemes of each candidate are unnested: marked with weight A (stored vectors
    -- are all D) and kept by ts_filter, both in C, instead of unnesting every lexeme and its positions.
    terms AS (
      SELECT c.session_id, c.seq, c.created_at, c.pending, u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf, length(c.v) AS dl
      FROM candidates c CROSS JOIN q CROSS JOIN LATERAL unnest(ts_filter(setweight(setweight(c.v, 'D'), 'A', q.lexemes), '{a}')) u
    ),
    stored AS (SELECT ts.lexeme, ts.df FROM q CROSS JOIN term_stats ts WHERE ts.user_id = ${query.userId} AND ts.lexeme = ANY (q.lexemes)),
    df AS (
      SELECT p.lexeme, (coalesce(ts.df, 0) + p.pending)::float8 AS n
      FROM (SELECT lexeme, count(*) FILTER (WHERE pending) AS pending FROM terms GROUP BY lexeme) p
      LEFT JOIN stored ts ON ts.lexeme = p.lexeme
    ),
    stats AS (
      SELECT greatest(coalesce(o.docs, 0) + c.pending, 1)::float8 AS n,
        CASE WHEN coalesce(o.docs, 0) > 0 THEN o.lexemes::float8 / o.docs ELSE c.avgdl END AS avgdl
      FROM (SELECT count(*) FILTER (WHERE pending) AS pending, coalesce(avg(length(v)), 0)::float8 AS avgdl FROM candidates) c
      LEFT JOIN owner_stats o ON o.user_id = ${query.userId}
    ),
    scores AS (
      SELECT t.session_id, t.seq, t.created_at,
        sum(ln(1 + greatest(st.n - df.n + 0.5, 0) / (df.n + 0.5)) * t.tf * ${K1 + 1}::float8 / (t.tf + ${K1}::float8 * (${1 - B}::float8 + ${B}::float8 * t.dl / greatest(st.avgdl, 1)))) AS score
      FROM terms t JOIN df ON df.lexeme = t.lexeme CROSS JOIN stats st
      GROUP BY t.session_id, t.seq, t.created_at
      ORDER BY score DESC, t.created_at DESC, t.seq DESC
      LIMIT ${limit}
    )
    ${around > 0 ? withAround : alone}`;
  const hits: SearchHit[] = [];
  let last: SearchHit | undefined;
  for (const row of rows) {
    const hitSeq = around > 0 ? Number(row.hit_seq) : row.seq;
    if (!last || last.sessionId !== row.session_id || last.seq !== hitSeq) {
      last = { sessionId: row.session_id, seq: hitSeq, snippet: "", message: undefined as unknown as Message };
      if (around > 0) last.around = [];
      hits.push(last);
    }
    const message = toMessage(row);
    last.around?.push(message);
    if (row.seq === hitSeq) {
      last.message = message;
      last.snippet = fulltextSnippet(messageText(message), query.text);
    }
  }
  return hits;
}

/** Searches one owner's messages; `lang` is the text search configuration. */
export async function searchMessages(sql: PgSql, lang: string, query: SearchQuery): Promise<SearchHit[]> {
  // Relevance ranks full text in any mode: any of the words, best first.
  if (query.ranking === "relevance")
    return searchRelevance(sql, lang, query, Math.max(0, Math.floor(query.limit ?? DEFAULT_SEARCH_LIMIT)));
  const fulltext = query.mode === "fulltext";
  // Parsed once: OFFSET 0 keeps the planner from inlining the calls into the per-row filter, where a
  // bound query text is parsed again for every row tested (17 ms instead of 0.7 ms for 1,000 rows).
  const queries = sql`(SELECT websearch_to_tsquery(${lang}::regconfig, ${query.text}) AS match OFFSET 0) q`;
  // The row's tsvector, built here while the row is pending.
  const tsv = sql`coalesce(m.tsv, to_tsvector(${lang}::regconfig, left(m.search_text, 100000)))`;
  let source;
  let filter = fulltext
    ? sql`AND (m.tsv @@ q.match OR (m.tsv IS NULL AND to_tsvector(${lang}::regconfig, left(m.search_text, 100000)) @@ q.match))`
    : sql`AND strpos(m.search_text, ${searchable(query.text)}) > 0`;
  if (!fulltext) source = sql`messages m JOIN sessions s ON s.id = m.session_id`;
  else if (await isSmallOwner(sql, query)) {
    // Owner first, pinned: each of the owner's sessions read by primary key (the LATERAL with OFFSET 0
    // cannot be flattened into a join, which in a mid-sized store became a scan of every message),
    // each row tested with ts_match_vq, which is what @@ runs but called by name, so no index serves it.
    source = sql`sessions s CROSS JOIN ${queries} CROSS JOIN LATERAL (
      SELECT m.session_id, m.seq, m.created_at, m.body, m.search_text, m.tsv FROM messages m
      WHERE m.session_id = s.id ${seqBounds(sql, query)} AND ts_match_vq(${tsv}, q.match) OFFSET 0) m`;
    filter = sql``;
  } else source = sql`messages m JOIN sessions s ON s.id = m.session_id CROSS JOIN ${queries}`;
  const rows = await sql<(MessageRow & { session_id: string })[]>`
    SELECT m.session_id, m.seq, m.created_at, m.body FROM ${source}
    WHERE s.user_id = ${query.userId}
    ${query.sessionId === undefined ? sql`` : sql`AND s.id = ${query.sessionId}`}
    ${query.activeSince === undefined ? sql`` : sql`AND s.last_activity_at >= ${Math.ceil(query.activeSince)}`}
    ${seqBounds(sql, query)}
    ${filter}
    ORDER BY m.created_at DESC, m.seq DESC
    LIMIT ${Math.max(0, Math.floor(query.limit ?? DEFAULT_SEARCH_LIMIT))}`;
  return rows.map((row) => {
    const message = toMessage(row);
    const text = messageText(message);
    return {
      sessionId: row.session_id,
      seq: row.seq,
      snippet: fulltext ? fulltextSnippet(text, query.text) : snippetOf(text, query.text),
      message,
    };
  });
}
