/**
 * Relevance ranking in code, for the stores without a full-text index (memory, file, Redis, and
 * {@link completeStore}'s derived search): BM25 over one owner's messages, any of the query's words,
 * English stopwords dropped and words Porter-stemmed (the stemmer SQLite's FTS5 `porter` tokenizer
 * and PostgreSQL's `english` configuration use), so every store ranks the same query alike.
 *
 * The index is built per search from the messages the store read for it: no state to keep in step
 * with appends, and its cost is the tokenizing of what the search reads anyway.
 */
import { stemmer } from "stemmer";
import type { Message, SearchHit } from "../types.js";
import { messageText, snippetOf } from "./helpers.js";

/** BM25's term-frequency saturation (the usual default, also Lucene's). */
export const BM25_K1 = 1.2;
/** BM25's length normalisation (the usual default, also Lucene's). */
export const BM25_B = 0.75;

/**
 * English stopwords a relevance query drops: Lucene's classic English stop set, the words questions
 * are made of (question words, auxiliaries, pronouns), and the fragments an apostrophe leaves
 * (`caroline's` → `caroline`, `s`). A word in most messages adds next to nothing to BM25 anyway;
 * dropping it keeps it from making every message a candidate.
 */
export const ENGLISH_STOPWORDS: ReadonlySet<string> = new Set([
  ..."a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with".split(
    " ",
  ),
  ..."what when where which who whom whose why how do does did has have had am were been being would could should can".split(
    " ",
  ),
  ..."i me my mine you your yours he him his she her hers we us our ours its them theirs".split(" "),
  ..."s t d ll m re ve".split(" "),
]);

/** Stems seen lately: words repeat across messages, and stemming is most of the tokenizing's cost. */
const stems = new Map<string, string>();
const STEM_CACHE_SIZE = 50_000;

function stem(word: string): string {
  let stemmed = stems.get(word);
  if (stemmed === undefined) {
    stemmed = stemmer(word);
    if (stems.size >= STEM_CACHE_SIZE) stems.clear();
    stems.set(word, stemmed);
  }
  return stemmed;
}

/** The terms of a text: lowercase runs of letters and digits, stopwords dropped, stemmed, in order. */
export function relevanceTerms(text: string): string[] {
  const terms: string[] = [];
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    if (!ENGLISH_STOPWORDS.has(word)) terms.push(stem(word));
  }
  return terms;
}

/** The messages of one session a search read. */
export interface SessionMessages {
  sessionId: string;
  messages: readonly Message[];
}

interface Scored {
  sessionId: string;
  message: Message;
  score: number;
  /** The first word of the text that matched a query term, for the snippet. */
  word: string;
}

/** A message with at least one of the query's terms, and what BM25 needs of it. */
interface Matched {
  sessionId: string;
  message: Message;
  /** Its terms, stopwords left out. */
  length: number;
  /** How often each query term occurs in it. */
  counts: Map<string, number>;
  word: string;
}

/** One search's BM25 tally: messages are added one at a time, so a caller can pause between them. */
class RelevanceTally {
  #documents = 0;
  #totalLength = 0;
  readonly #frequency = new Map<string, number>();
  readonly #matched: Matched[] = [];

  constructor(readonly query: ReadonlySet<string>) {}

  add(sessionId: string, message: Message): void {
    const body = messageText(message);
    this.#documents++;
    let length = 0;
    let counts: Map<string, number> | undefined;
    let word = "";
    for (const raw of body.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
      if (ENGLISH_STOPWORDS.has(raw)) continue;
      length++;
      const term = stem(raw);
      if (!this.query.has(term)) continue;
      counts ??= new Map();
      counts.set(term, (counts.get(term) ?? 0) + 1);
      word ||= raw;
    }
    this.#totalLength += length;
    if (!counts) return;
    for (const term of counts.keys()) this.#frequency.set(term, (this.#frequency.get(term) ?? 0) + 1);
    this.#matched.push({ sessionId, message, length, counts, word });
  }

  /** A scorer of the matching messages by BM25, from the counts of every message added. */
  #scorer(): (matched: Matched) => Scored {
    const documents = this.#documents;
    const averageLength = documents > 0 ? this.#totalLength / documents : 0;
    const idf = new Map(
      [...this.#frequency].map(([term, n]) => [term, Math.log(1 + (documents - n + 0.5) / (n + 0.5))]),
    );
    return ({ sessionId, message, length, counts, word }) => {
      const norm = 1 - BM25_B + (BM25_B * length) / (averageLength || 1);
      let score = 0;
      for (const [term, tf] of counts) score += (idf.get(term)! * tf * (BM25_K1 + 1)) / (tf + BM25_K1 * norm);
      return { sessionId, message, score, word };
    };
  }

  /** The best `limit` of `scored` as hits; with `copy`, their messages are copies. */
  static hits(scored: Scored[], limit: number, copy = true): SearchHit[] {
    scored.sort(
      (a, b) => b.score - a.score || b.message.createdAt - a.message.createdAt || b.message.seq - a.message.seq,
    );
    return scored.slice(0, limit).map(({ sessionId, message, word }) => ({
      sessionId,
      seq: message.seq,
      snippet: snippetOf(messageText(message), word),
      message: copy ? structuredClone(message) : message,
    }));
  }

  /** The best `limit` hits, scored in one go. */
  rank(limit: number): SearchHit[] {
    return RelevanceTally.hits(this.#matched.map(this.#scorer()), limit);
  }

  /** {@link rank}, awaiting `pause` between messages when it gives a promise (between slices). */
  async rankPausing(limit: number, pause: () => Promise<void> | undefined, copy = true): Promise<SearchHit[]> {
    const score = this.#scorer();
    const scored: Scored[] = [];
    for (const matched of this.#matched) {
      scored.push(score(matched));
      const paused = pause();
      if (paused) await paused;
    }
    return RelevanceTally.hits(scored, limit, copy);
  }
}

/**
 * The `limit` messages of `sessions` that best match any of `text`'s terms, by BM25 (k1 1.2, b 0.75;
 * IDF `ln(1 + (N - n + 0.5) / (n + 0.5))` over the messages given), best first; equal scores newest
 * first. A message matching more of the terms, or rarer ones, ranks higher. Hits are copies. A text
 * of stopwords only finds nothing.
 *
 * It runs to the end in one go: over a large owner (tens of thousands of messages) that holds the
 * event loop for hundreds of milliseconds (docs/benchmarks.md, "Event loop"); a server should use
 * {@link rankByRelevanceInSlices}, which gives the same hits.
 */
export function rankByRelevance(sessions: Iterable<SessionMessages>, text: string, limit: number): SearchHit[] {
  const query = new Set(relevanceTerms(text));
  if (query.size === 0 || limit <= 0) return [];
  const tally = new RelevanceTally(query);
  for (const { sessionId, messages } of sessions) {
    for (const message of messages) tally.add(sessionId, message);
  }
  return tally.rank(limit);
}

/** How long {@link rankByRelevanceInSlices} tokenizes before it lets other work run, by default. */
export const RELEVANCE_SLICE_MS = 10;

/** Messages tokenized between two looks at the clock (a look costs more than a short message). */
const CLOCK_EVERY = 64;

/**
 * {@link rankByRelevance} in slices: it tokenizes for about `sliceMs` (default
 * {@link RELEVANCE_SLICE_MS}), then lets the event loop run other requests' work (`setImmediate`)
 * before going on, so a search over a large owner does not stop everyone else's. Same hits, same
 * order; the final scoring and sort (of the matching messages only) run in one go. `copy: false`
 * returns the given messages themselves in the hits, for a caller whose messages are its own fresh
 * objects (a store that just parsed them): a copy of each hit is most of ranking a few hundred.
 */
export async function rankByRelevanceInSlices(
  sessions: Iterable<SessionMessages>,
  text: string,
  limit: number,
  sliceMs: number = RELEVANCE_SLICE_MS,
  copy = true,
): Promise<SearchHit[]> {
  const query = new Set(relevanceTerms(text));
  if (query.size === 0 || limit <= 0) return [];
  const tally = new RelevanceTally(query);
  // The arrays as they are now: a store's own arrays may grow or shrink while this waits.
  const snapshot = [...sessions].map(({ sessionId, messages }) => ({ sessionId, messages: messages.slice() }));
  let sliceStart = performance.now();
  let sinceClock = 0;
  // Undefined (go on) until the slice has run `sliceMs`, then a promise settled at the loop's next turn.
  const pause = (): Promise<void> | undefined => {
    if (++sinceClock < CLOCK_EVERY) return undefined;
    sinceClock = 0;
    if (performance.now() - sliceStart < sliceMs) return undefined;
    return new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      sliceStart = performance.now();
    });
  };
  for (const { sessionId, messages } of snapshot) {
    for (const message of messages) {
      tally.add(sessionId, message);
      const paused = pause();
      if (paused) await paused;
    }
  }
  return tally.rankPausing(limit, pause, copy);
}
