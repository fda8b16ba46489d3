/** Texts at least this long are found by length, then compared whole. */
const LONG_TEXT = 32;
/** Most cached texts of one length. */
const BUCKET_LIMIT = 16;

/**
 * Values by text. A text read from a store is a new string every turn, and V8 hashes a new string
 * in full before a Map lookup (microseconds for a long one, milliseconds for megabytes); finding
 * long texts by length and comparing them with `===` costs a fraction of that.
 */
export class TextCache<V> {
  #short = new Map<string, V>();
  #long = new Map<number, (string | V)[]>();
  #size = 0;
  readonly #limit: number;

  /** @param limit most texts held; past it the cache starts afresh. */
  constructor(limit: number) {
    this.#limit = limit;
  }

  get(text: string): V | undefined {
    if (text.length < LONG_TEXT) return this.#short.get(text);
    const bucket = this.#long.get(text.length);
    if (bucket) for (let i = 0; i < bucket.length; i += 2) if (bucket[i] === text) return bucket[i + 1] as V;
    return undefined;
  }

  set(text: string, value: V): void {
    if (++this.#size > this.#limit) {
      this.#short.clear();
      this.#long.clear();
      this.#size = 1;
    }
    if (text.length < LONG_TEXT) {
      this.#short.set(text, value);
      return;
    }
    let bucket = this.#long.get(text.length);
    if (!bucket) {
      bucket = [];
      this.#long.set(text.length, bucket);
    }
    for (let i = 0; i < bucket.length; i += 2) {
      if (bucket[i] === text) {
        bucket[i + 1] = value;
        return;
      }
    }
    if (bucket.length >= BUCKET_LIMIT * 2) bucket.splice(0, 2);
    bucket.push(text, value);
  }
}
