/**
 * The plain BM25 floor the retrieval benchmark compares threadkeep's search with: what any text search
 * should at least reach. Deliberately plain, so its figure is a floor anyone can reproduce: k1 1.2,
 * b 0.75, lowercase alphanumeric tokens, a short English stopword list, no stemming, and a query that
 * is the OR of its words (a document matching any of them scores).
 */

/** BM25's term-frequency saturation. */
export const BM25_K1 = 1.2;
/** BM25's length normalisation. */
export const BM25_B = 0.75;

/**
 * A short English stopword list: Lucene's classic English stop set, the question words and auxiliaries
 * a question starts with, and the fragments an apostrophe leaves (`caroline's` → `caroline`, `s`).
 */
export const STOPWORDS: ReadonlySet<string> = new Set([
  // Lucene's ENGLISH_STOP_WORDS_SET.
  ..."a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with".split(
    " ",
  ),
  // What questions are made of.
  ..."what when where which who whom whose why how do does did has have had".split(" "),
  ..."s t d ll m re ve".split(" "),
]);

/** Lowercase runs of ASCII letters and digits, stopwords dropped, in order (repeats kept). */
export function tokenize(text: string): string[] {
  return (text.toLowerCase().match(/[a-z0-9]+/g) ?? []).filter((token) => !STOPWORDS.has(token));
}

/** A document of the index: an id the caller maps back, and its text. */
export interface Bm25Document<Id> {
  id: Id;
  text: string;
}

/** One ranked document. */
export interface Bm25Hit<Id> {
  id: Id;
  score: number;
}

/**
 * An in-memory BM25 index over a fixed set of documents (one owner's turns). IDF is Lucene's
 * `ln(1 + (N - n + 0.5) / (n + 0.5))`, never negative, so a word in most documents still adds a little.
 */
export class Bm25Index<Id> {
  readonly #ids: Id[] = [];
  readonly #lengths: number[] = [];
  /** token → [document index, term frequency] pairs. */
  readonly #postings = new Map<string, [number, number][]>();
  readonly #averageLength: number;

  constructor(documents: Iterable<Bm25Document<Id>>) {
    let total = 0;
    for (const { id, text } of documents) {
      const doc = this.#ids.length;
      const tokens = tokenize(text);
      const counts = new Map<string, number>();
      for (const token of tokens) counts.set(token, (counts.get(token) ?? 0) + 1);
      for (const [token, tf] of counts) {
        const list = this.#postings.get(token) ?? [];
        list.push([doc, tf]);
        this.#postings.set(token, list);
      }
      this.#ids.push(id);
      this.#lengths.push(tokens.length);
      total += tokens.length;
    }
    this.#averageLength = this.#ids.length > 0 ? total / this.#ids.length : 0;
  }

  /** Documents in the index. */
  get size(): number {
    return this.#ids.length;
  }

  /** The inverse document frequency of a (tokenized) word; 0 for one no document holds. */
  idf(token: string): number {
    const n = this.#postings.get(token)?.length ?? 0;
    if (n === 0) return 0;
    return Math.log(1 + (this.#ids.length - n + 0.5) / (n + 0.5));
  }

  /**
   * The `limit` best documents for any of the query's words, best first; equal scores keep the
   * documents' order in the index. A query of stopwords or unknown words finds nothing.
   */
  search(query: string, limit: number): Bm25Hit<Id>[] {
    const scores = new Map<number, number>();
    // A word repeated in the query counts once: the OR of its words.
    for (const token of new Set(tokenize(query))) {
      const postings = this.#postings.get(token);
      if (!postings) continue;
      const idf = this.idf(token);
      for (const [doc, tf] of postings) {
        const norm = 1 - BM25_B + (BM25_B * this.#lengths[doc]) / this.#averageLength;
        scores.set(doc, (scores.get(doc) ?? 0) + (idf * tf * (BM25_K1 + 1)) / (tf + BM25_K1 * norm));
      }
    }
    return [...scores]
      .sort((a, b) => b[1] - a[1] || a[0] - b[0])
      .slice(0, limit)
      .map(([doc, score]) => ({ id: this.#ids[doc], score }));
  }
}
