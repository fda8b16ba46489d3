/**
 * The relevance ranking search and recall share, with no model: the store finds the owner's messages
 * holding any of the query's words and orders them by its BM25 (SQLite's FTS5, PostgreSQL's SQL, the
 * in-code ranking of the others); the best {@link RANKING_DEPTH} of them are candidates, and core
 * ranks those again, the same way on every store, with each turn scored together with the turns
 * around it: BM25 over the turn's words plus, at half weight, its neighbours' words, so a turn whose
 * question or reply holds the rest of the query's words comes first (answers span turns).
 *
 * The statistics BM25 needs (how many messages hold a word, their average length) are taken from the
 * candidates and their neighbours (not from other messages a read passed through). That needs nothing
 * of a store beyond `search` and reads, so every store ranks alike, and measured on LoCoMo it ranks as
 * well as the owner's full statistics (docs/benchmarks/retrieval.md, "Ranking in core").
 *
 * Ownership: candidates come from the owner-scoped search; their neighbours with it, when the store
 * returns them (`around`: PostgreSQL, in the same statement), else from one owner-scoped read of all
 * their ranges (`getMessageRanges`).
 */
import { BM25_B, BM25_K1, relevanceTerms } from "./store/relevance.js";
import { messageText } from "./store/helpers.js";
import type { FullStore, Message, SearchHit } from "./types.js";

/** Candidates the store's BM25 gives core to rank again (measured: 50, 100 and 200 rank alike on LoCoMo). */
export const RANKING_DEPTH = 50;

/** How much a neighbouring turn's words count towards a turn's score (1 would be its own). */
export const NEIGHBOUR_WEIGHT = 0.5;

/** A ranking of one owner's turns. */
export interface RankingQuery {
  /** The owner: every store read is scoped to it. */
  userId: string;
  /** Only this session. */
  sessionId?: string;
  /** Leaves this session out (recall: the session being answered). */
  excludeSessionId?: string;
  text: string;
  limit: number;
  /** Sessions last active before this are left out (see `SearchQuery.activeSince`). */
  activeSince?: number;
  /**
   * A caller's test of the store's candidates: when none passes, the ranking stops after the search
   * and finds nothing (the neighbours are not read). It ranks nothing differently otherwise. Recall
   * uses it to skip the neighbour reads of a message it would recall nothing for.
   */
  unlessNone?: (hit: SearchHit) => boolean;
}

/** The parts a turn's score adds up from. */
export interface RankingReasons {
  /** BM25 of the turn's own words. */
  lexical: number;
  /** What its neighbouring turns' words added. */
  neighbours: number;
}

/** A ranked turn: a search hit with its score (comparable within one ranking only) and its parts. */
export interface RankedTurn extends SearchHit {
  score: number;
  reasons: RankingReasons;
}

/** A message read for the ranking, tokenized. */
interface Read {
  message: Message;
  /** How often each query term occurs in it. */
  counts: Map<string, number>;
  /** Its terms (stopwords left out). */
  length: number;
}

/** Seqs between two wanted neighbours read through rather than in a read of their own (a read costs more than a few messages). */
const READ_THROUGH = 10;

const key = (sessionId: string, seq: number) => `${sessionId}\n${seq}`;

function tokenized(message: Message, query: ReadonlySet<string>): Read {
  const terms = relevanceTerms(messageText(message));
  const counts = new Map<string, number>();
  for (const term of terms) if (query.has(term)) counts.set(term, (counts.get(term) ?? 0) + 1);
  return { message, counts, length: terms.length };
}

/**
 * The seqs next to the candidates that are not candidates themselves, as ranges to read
 * (`[sessionId, fromSeq, toSeq]`), neighbouring ones joined.
 */
function neighbourRanges(candidates: readonly SearchHit[], known: ReadonlySet<string>): [string, number, number][] {
  const wanted = new Map<string, Set<number>>();
  for (const { sessionId, seq } of candidates) {
    for (const s of [seq - 1, seq + 1]) {
      if (s < 1 || known.has(key(sessionId, s))) continue;
      const seqs = wanted.get(sessionId) ?? new Set<number>();
      seqs.add(s);
      wanted.set(sessionId, seqs);
    }
  }
  const ranges: [string, number, number][] = [];
  for (const [sessionId, seqs] of wanted) {
    let last: [string, number, number] | undefined;
    for (const seq of [...seqs].sort((a, b) => a - b)) {
      // Candidates in between are read again: one read instead of two.
      if (last && seq <= last[2] + READ_THROUGH) last[2] = seq;
      else ranges.push((last = [sessionId, seq, seq]));
    }
  }
  return ranges;
}

/** Reads the ranges, owner-scoped, in one call; a session deleted or expired since the search reads as empty. */
function readRanges(
  store: FullStore,
  query: RankingQuery,
  ranges: readonly [string, number, number][],
): Promise<Message[][]> {
  if (ranges.length === 0) return Promise.resolve([]);
  return store.getMessageRanges(
    ranges.map(([sessionId, fromSeq, toSeq]) => ({ sessionId, fromSeq, toSeq })),
    { userId: query.userId, activeSince: query.activeSince },
  );
}

/**
 * The owner's turns that best match `query.text`, best first, at most `query.limit`: the store's BM25
 * candidates ranked again in core, each turn with its neighbours (see the module's comment). Equal
 * scores: newest first. A text of stopwords only finds nothing.
 */
export async function rankTurns(store: FullStore, query: RankingQuery): Promise<RankedTurn[]> {
  return (await rankTurnsReading(store, query)).turns;
}

/** What a ranking read, so a caller can show a hit's neighbours without reading them again. */
export interface RankingReads {
  turns: RankedTurn[];
  /**
   * Whether a seq of a session was read (`known(sessionId, seq)`), and the message there if there is
   * one: `undefined` for a seq not read, `null` for one read and found empty (before the first or
   * after the last message).
   */
  known(sessionId: string, seq: number): Message | null | undefined;
}

/** {@link rankTurns}, with what it read. */
export async function rankTurnsReading(store: FullStore, query: RankingQuery): Promise<RankingReads> {
  const terms = new Set(relevanceTerms(query.text));
  const none: RankingReads = { turns: [], known: () => undefined };
  if (terms.size === 0 || query.limit <= 0) return none;
  const depth = Math.max(RANKING_DEPTH, query.limit);
  const found = await store.search({
    userId: query.userId,
    sessionId: query.sessionId,
    text: query.text,
    activeSince: query.activeSince,
    mode: store.capabilities.fullTextSearch ? "fulltext" : "substring",
    ranking: "relevance",
    limit: depth,
    around: 1,
  });
  const candidates =
    query.excludeSessionId === undefined ? found : found.filter((hit) => hit.sessionId !== query.excludeSessionId);
  if (candidates.length === 0 || (query.unlessNone && !candidates.some(query.unlessNone))) return none;

  // Every message read (candidates, the neighbours a store returned with its hits, the ranges read
  // below), and every seq read, found or not.
  const messages = new Map<string, Message>();
  const covered = new Set<string>();
  for (const hit of candidates) {
    const k = key(hit.sessionId, hit.seq);
    messages.set(k, hit.message);
    covered.add(k);
    if (!hit.around) continue;
    for (let seq = Math.max(1, hit.seq - 1); seq <= hit.seq + 1; seq++) covered.add(key(hit.sessionId, seq));
    for (const message of hit.around) messages.set(key(hit.sessionId, message.seq), message);
  }
  const ranges = neighbourRanges(candidates, covered);
  // The neighbours are read while the candidates are tokenized.
  const reading = readRanges(store, query, ranges);
  const reads = new Map<string, Read>();
  for (const hit of candidates) reads.set(key(hit.sessionId, hit.seq), tokenized(hit.message, terms));
  const around = await reading;
  ranges.forEach(([sessionId, fromSeq, toSeq], i) => {
    for (let seq = fromSeq; seq <= toSeq; seq++) covered.add(key(sessionId, seq));
    for (const message of around[i]) messages.set(key(sessionId, message.seq), message);
  });
  // The statistics count the candidates and their neighbours, not what a range read through between them.
  for (const { sessionId, seq } of candidates) {
    for (const k of [key(sessionId, seq - 1), key(sessionId, seq + 1)]) {
      const message = messages.get(k);
      if (message && !reads.has(k)) reads.set(k, tokenized(message, terms));
    }
  }

  // BM25's statistics over the messages read (candidates and neighbours).
  const documents = reads.size;
  let totalLength = 0;
  const frequency = new Map<string, number>();
  for (const { counts, length } of reads.values()) {
    totalLength += length;
    for (const term of counts.keys()) frequency.set(term, (frequency.get(term) ?? 0) + 1);
  }
  const averageLength = totalLength / documents || 1;
  const idf = (term: string) => {
    const n = frequency.get(term) ?? 0;
    return Math.log(1 + (documents - n + 0.5) / (n + 0.5));
  };
  const bm25 = (counts: ReadonlyMap<string, number>, norm: number) => {
    let score = 0;
    for (const [term, tf] of counts) score += (idf(term) * tf * (BM25_K1 + 1)) / (tf + BM25_K1 * norm);
    return score;
  };
  // A window is the turn plus half of each neighbour: its length is compared with such windows'.
  const windowLength = averageLength * (1 + 2 * NEIGHBOUR_WEIGHT);

  const ranked = candidates.map((hit): RankedTurn => {
    const own = reads.get(key(hit.sessionId, hit.seq))!;
    const counts = new Map(own.counts);
    let length = own.length;
    for (const seq of [hit.seq - 1, hit.seq + 1]) {
      const neighbour = reads.get(key(hit.sessionId, seq));
      if (!neighbour) continue;
      length += NEIGHBOUR_WEIGHT * neighbour.length;
      for (const [term, tf] of neighbour.counts) counts.set(term, (counts.get(term) ?? 0) + NEIGHBOUR_WEIGHT * tf);
    }
    const score = bm25(counts, 1 - BM25_B + (BM25_B * length) / windowLength);
    const lexical = bm25(own.counts, 1 - BM25_B + (BM25_B * own.length) / averageLength);
    const { around: _around, ...turn } = hit;
    return { ...turn, score, reasons: { lexical, neighbours: score - lexical } };
  });
  ranked.sort((a, b) => b.score - a.score || b.message.createdAt - a.message.createdAt || b.seq - a.seq);
  return {
    turns: ranked.slice(0, query.limit),
    known: (sessionId, seq) => {
      const k = key(sessionId, seq);
      return covered.has(k) ? (messages.get(k) ?? null) : undefined;
    },
  };
}
