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
  ..."a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with".split(" "),
  ..."what when where which who whom whose why how do does did has have had am were been being would could should can".split(" "),
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

/**
 * The `limit` messages of `sessions` that best match any of `text`'s terms, by BM25 (k1 1.2, b 0.75;
 * IDF `ln(1 + (N - n + 0.5) / (n + 0.5))` over the messages given), best first; equal scores newest
 * first. A message matching more of the terms, or rarer ones, ranks higher. Hits are copies. A text
 * of stopwords only finds nothing.
 */
export function rankByRelevance(sessions: Iterable<SessionMessages>, text: string, limit: number): SearchHit[] {
  const query = new Set(relevanceTerms(text));
  if (query.size === 0 || limit <= 0) return [];
  let documents = 0;
  let totalLength = 0;
  const frequency = new Map<string, number>();
  const matched: { sessionId: string; message: Message; length: number; counts: Map<string, number>; word: string }[] = [];
  for (const { sessionId, messages } of sessions) {
    for (const message of messages) {
      const body = messageText(message);
      documents++;
      let length = 0;
      let counts: Map<string, number> | undefined;
      let word = "";
      for (const raw of body.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
        if (ENGLISH_STOPWORDS.has(raw)) continue;
        length++;
        const term = stem(raw);
        if (!query.has(term)) continue;
        counts ??= new Map();
        counts.set(term, (counts.get(term) ?? 0) + 1);
        word ||= raw;
      }
      totalLength += length;
      if (!counts) continue;
      for (const term of counts.keys()) frequency.set(term, (frequency.get(term) ?? 0) + 1);
      matched.push({ sessionId, message, length, counts, word });
    }
  }
  const averageLength = documents > 0 ? totalLength / documents : 0;
  const idf = new Map([...frequency].map(([term, n]) => [term, Math.log(1 + (documents - n + 0.5) / (n + 0.5))]));
  const scored: Scored[] = matched.map(({ sessionId, message, length, counts, word }) => {
    const norm = 1 - BM25_B + (BM25_B * length) / (averageLength || 1);
    let score = 0;
    for (const [term, tf] of counts) score += (idf.get(term)! * tf * (BM25_K1 + 1)) / (tf + BM25_K1 * norm);
    return { sessionId, message, score, word };
  });
  scored.sort((a, b) => b.score - a.score || b.message.createdAt - a.message.createdAt || b.message.seq - a.message.seq);
  return scored.slice(0, limit).map(({ sessionId, message, word }) => ({
    sessionId,
    seq: message.seq,
    snippet: snippetOf(messageText(message), word),
    message: structuredClone(message),
  }));
}
