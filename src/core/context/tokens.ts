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
  return /^(gpt-4(-|$)|gpt-4-32k|gpt-35|gpt-3\.5|text-embedding-(ada|3))/.test(name) ? "cl100k_base" : "o200k_base";
}

/** Most cached texts per encoding; beyond it the oldest quarter is forgotten. */
const CACHE_LIMIT = 10_000;
const caches = new Map<EncodingName, Map<string, number>>();

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
  #cache: Map<string, number>;

  constructor(encoding: EncodingName) {
    this.encoding = encoding;
    let cache = caches.get(encoding);
    if (!cache) {
      cache = new Map();
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
    if (this.#cache.size >= CACHE_LIMIT) {
      let drop = CACHE_LIMIT >> 2;
      for (const key of this.#cache.keys()) {
        this.#cache.delete(key);
        if (--drop === 0) break;
      }
    }
    this.#cache.set(text, count);
    return count;
  }

  /** Tokens of a message's content alone. */
  content(content: ChatMessage["content"]): number {
    if (typeof content === "string") return this.text(content);
    if (!Array.isArray(content)) return 0;
    let total = 0;
    for (const part of content) total += typeof part.text === "string" ? this.text(part.text) : NON_TEXT_PART_TOKENS;
    return total;
  }

  /** Tokens a message costs in a request: overhead, name, content, tool calls, tool call id. */
  message(message: ChatMessage): number {
    let total = MESSAGE_OVERHEAD_TOKENS + this.content(message.content);
    if (message.name) total += 1 + this.text(message.name);
    if (message.tool_calls) {
      for (const call of message.tool_calls) {
        total += MESSAGE_OVERHEAD_TOKENS + this.text(call.id) + this.text(call.function.name) + this.text(call.function.arguments);
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
