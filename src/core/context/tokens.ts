import { createRequire } from "node:module";
import type { ChatMessage } from "../types.js";

/** The tokenizer encodings threadkeep counts with. */
export type EncodingName = "o200k_base" | "cl100k_base";

/** Tokens every chat message costs beyond its content (OpenAI's published counting rule). */
export const MESSAGE_OVERHEAD_TOKENS = 3;
/** Tokens the model's reply is primed with, once per request. */
export const REPLY_PRIMING_TOKENS = 3;
/** Estimate for a non-text content part (an image at low detail is 85 tokens). */
export const NON_TEXT_PART_TOKENS = 85;

interface Encoding {
  countTokens(text: string, options?: { disallowedSpecial?: Set<string> }): number;
  encode(text: string, options?: { disallowedSpecial?: Set<string> }): number[];
  decode(tokens: Iterable<number>): string;
}

// Loaded synchronously on first use: an encoding's tables take ~100-200 ms and a few MB to load.
const requireEncoding = createRequire(import.meta.url);
const encodings = new Map<EncodingName, Encoding>();
// Text that happens to contain "<|endoftext|>" is counted as text, never rejected.
const AS_TEXT = { disallowedSpecial: new Set<string>() };

function encodingOf(name: EncodingName): Encoding {
  let encoding = encodings.get(name);
  if (!encoding) {
    encoding = requireEncoding(`gpt-tokenizer/encoding/${name}`) as Encoding;
    encodings.set(name, encoding);
  }
  return encoding;
}

/**
 * The encoding for a model name: cl100k_base for GPT-4 (not 4o/4.1/4.5), GPT-3.5 and the older
 * embedding models; o200k_base for everything else, including unknown and non-OpenAI models, for
 * which it is an approximation (gpt-tokenizer also falls back to o200k_base for unknown names).
 */
export function encodingForModel(model?: string): EncodingName {
  if (!model) return "o200k_base";
  const name = model.toLowerCase().replace(/^.*\//, "");
  return /^(gpt-4(-|$)|gpt-4-32k|gpt-35|gpt-3\.5|text-embedding-(ada|3))/.test(name)
    ? "cl100k_base"
    : "o200k_base";
}

/** Most cached texts per encoding; past it the cache starts afresh. */
const CACHE_LIMIT = 10_000;
/** Texts at least this long are found by length, then compared whole. */
const LONG_TEXT = 32;
/** Most cached texts of one length. */
const BUCKET_LIMIT = 16;

/**
 * Token counts by text. A text read from a store is a new string every turn, and V8 hashes a new
 * string in full before a Map lookup (microseconds for a long one); finding long texts by length and
 * comparing them with `===` costs a fraction of that.
 */
class CountCache {
  #short = new Map<string, number>();
  #long = new Map<number, (string | number)[]>();
  #size = 0;

  get(text: string): number | undefined {
    if (text.length < LONG_TEXT) return this.#short.get(text);
    const bucket = this.#long.get(text.length);
    if (bucket)
      for (let i = 0; i < bucket.length; i += 2) if (bucket[i] === text) return bucket[i + 1] as number;
    return undefined;
  }

  set(text: string, count: number): void {
    if (++this.#size > CACHE_LIMIT) {
      this.#short.clear();
      this.#long.clear();
      this.#size = 1;
    }
    if (text.length < LONG_TEXT) {
      this.#short.set(text, count);
      return;
    }
    let bucket = this.#long.get(text.length);
    if (!bucket) {
      bucket = [];
      this.#long.set(text.length, bucket);
    }
    if (bucket.length >= BUCKET_LIMIT * 2) bucket.splice(0, 2);
    bucket.push(text, count);
  }
}

const caches = new Map<EncodingName, CountCache>();

/** Forgets every cached token count (benchmarks measure the cold path with it). */
export function clearTokenCache(): void {
  caches.clear();
}

/**
 * Counts tokens of texts and chat messages with one encoding. Counts are cached by text, shared by
 * every counter of the encoding, so history read again on the next turn is not tokenised again.
 */
export class TokenCounter {
  readonly encoding: EncodingName;
  #cache: CountCache;

  constructor(encoding: EncodingName) {
    this.encoding = encoding;
    let cache = caches.get(encoding);
    if (!cache) {
      cache = new CountCache();
      caches.set(encoding, cache);
    }
    this.#cache = cache;
  }

  /** Tokens of a text. */
  text(text: string): number {
    if (text.length === 0) return 0;
    const cached = this.#cache.get(text);
    if (cached !== undefined) return cached;
    const count = encodingOf(this.encoding).countTokens(text, AS_TEXT);
    this.#cache.set(text, count);
    return count;
  }

  /** Tokens of a message's content alone. */
  content(content: ChatMessage["content"]): number {
    if (typeof content === "string") return this.text(content);
    if (!Array.isArray(content)) return 0;
    let total = 0;
    for (const part of content)
      total += typeof part.text === "string" ? this.text(part.text) : NON_TEXT_PART_TOKENS;
    return total;
  }

  /** Tokens a message costs in a request: overhead, name, content, tool calls, tool call id. */
  message(message: ChatMessage): number {
    let total = MESSAGE_OVERHEAD_TOKENS + this.content(message.content);
    if (message.name) total += 1 + this.text(message.name);
    if (message.tool_calls) {
      for (const call of message.tool_calls) {
        total +=
          MESSAGE_OVERHEAD_TOKENS +
          this.text(call.id) +
          this.text(call.function.name) +
          this.text(call.function.arguments);
      }
    }
    if (message.tool_call_id) total += this.text(message.tool_call_id);
    return total;
  }

  /** Tokens of a whole request's messages, reply priming included. */
  messages(messages: readonly ChatMessage[]): number {
    let total = REPLY_PRIMING_TOKENS;
    for (const message of messages) total += this.message(message);
    return total;
  }

  /** The first `maxTokens` tokens of a text (decoded, so it may end mid-word). */
  head(text: string, maxTokens: number): string {
    if (maxTokens <= 0) return "";
    const encoding = encodingOf(this.encoding);
    const tokens = encoding.encode(text, AS_TEXT);
    if (tokens.length <= maxTokens) return text;
    // A cut inside a multi-byte character decodes to a replacement character; drop it.
    return encoding.decode(tokens.slice(0, maxTokens)).replace(/\uFFFD+$/, "");
  }
}

/** Token count of a request's messages for a model (the same count the assembler keeps to). */
export function countContextTokens(messages: readonly ChatMessage[], model?: string): number {
  return new TokenCounter(encodingForModel(model)).messages(messages);
}
