import { createRequire } from "node:module";
import type { ChatMessage } from "../types.js";
import { TextCache } from "./count-cache.js";
import { CHUNK_CHARS, nextChunk } from "./text-chunks.js";

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

/** Most cached texts per encoding; past it the cache starts afresh. */
const CACHE_LIMIT = 10_000;
/** Most texts whose leading tokens are kept for cutting (a few dozen KB each). */
const PREFIX_LIMIT = 32;
/** A text counted at this many tokens or more keeps its leading tokens: it may be cut. */
const KEEP_PREFIX_TOKENS = 512;

/** A text's count: exact when `complete`, else an estimate made while counting stopped past `limit`. */
interface Measured {
  count: number;
  complete: boolean;
  limit: number;
}

/** A long text's leading tokens, and where its chunks ended with the count up to each end. */
interface Prefix {
  tokens: number[];
  ends: number[];
  counts: number[];
}

const caches = new Map<EncodingName, { counts: TextCache<Measured>; prefixes: TextCache<Prefix> }>();

/** Forgets every cached token count (benchmarks measure the cold path with it). */
export function clearTokenCache(): void {
  caches.clear();
}

/** Characters of one text counted at least before the rest may be estimated. @default 131072 */
export const EXACT_TEXT_CHARS = 131_072;
/** Tokens one counter counts in all before longer texts are estimated. @default 65536 */
export const COUNTER_WORK_TOKENS = 65_536;
/** Texts up to this long are always counted, however much the counter has done. */
const ALWAYS_COUNTED = 64;
/** Most leading tokens kept of one text. */
const PREFIX_MAX = 131_072;
/** How long an async preparation runs before it lets other work of the event loop run. */
const SLICE_MS = 8;

/** Options of a {@link TokenCounter}. */
export interface TokenCounterOptions {
  /**
   * The most tokens that matter (the token budget): a text is counted exactly until it is past
   * this, and the rest estimated from the part counted, so one huge text costs what the budget
   * does, not what its length does. @default Infinity (every text counted exactly)
   */
  limit?: number;
}

/** Counting one text chunk by chunk, so it can be paused (prepare) or run through (text). */
class Measurement {
  count = 0;
  at = 0;
  readonly tokens: number[] | null;
  readonly ends: number[] = [];
  readonly counts: number[] = [];

  constructor(
    readonly text: string,
    readonly encoding: Encoding,
    readonly limit: number,
    readonly cap: number,
    keepTokens: boolean,
  ) {
    this.tokens = keepTokens ? [] : null;
  }

  get done(): boolean {
    return this.at >= this.text.length || (this.at > 0 && (this.count > this.limit || this.at >= this.cap));
  }

  step(): void {
    const chunk = nextChunk(this.text, this.at);
    const piece = this.text.slice(chunk.start, chunk.end);
    if (this.tokens && this.tokens.length < PREFIX_MAX) {
      const tokens = this.encoding.encode(piece, AS_TEXT);
      for (const token of tokens) this.tokens.push(token);
      this.count += tokens.length;
      this.ends.push(chunk.end);
      this.counts.push(this.count);
    } else {
      this.count += this.encoding.countTokens(piece, AS_TEXT);
    }
    this.at = chunk.end;
  }

  result(): Measured {
    const complete = this.at >= this.text.length;
    return complete
      ? { count: this.count, complete, limit: Number.POSITIVE_INFINITY }
      : { count: Math.ceil((this.count * this.text.length) / this.at), complete, limit: this.limit };
  }
}

/**
 * Counts tokens of texts and chat messages with one encoding. Counts are cached by text, shared by
 * every counter of the encoding, so history read again on the next turn is not tokenised again.
 *
 * Cost is linear and bounded: texts are tokenised in chunks (see text-chunks.ts), and with a
 * `limit` a text is counted only until it is past the limit (or past max(131072, 8 × limit)
 * characters), the rest estimated at the rate of the part counted; after max(65536, 4 × limit)
 * tokens counted in all, longer texts are estimated at the counter's rate so far. Estimates only
 * occur for texts larger than the budget, which are cut (or dropped) anyway. {@link prepare}
 * does the counting ahead, a few milliseconds at a time, so a server's event loop is never held long.
 */
export class TokenCounter {
  readonly encoding: EncodingName;
  /** The limit counts are exact up to. */
  readonly limit: number;
  #counts: TextCache<Measured>;
  #prefixes: TextCache<Prefix>;
  #textCap: number;
  #workCap: number;
  #work = 0;
  #chars = 0;

  constructor(encoding: EncodingName, options: TokenCounterOptions = {}) {
    this.encoding = encoding;
    this.limit = options.limit ?? Number.POSITIVE_INFINITY;
    this.#textCap = Math.max(EXACT_TEXT_CHARS, this.limit * 8);
    this.#workCap = Math.max(COUNTER_WORK_TOKENS, this.limit * 4);
    let cache = caches.get(encoding);
    if (!cache) {
      cache = { counts: new TextCache(CACHE_LIMIT), prefixes: new TextCache(PREFIX_LIMIT) };
      caches.set(encoding, cache);
    }
    this.#counts = cache.counts;
    this.#prefixes = cache.prefixes;
  }

  #cached(text: string): number | undefined {
    const cached = this.#counts.get(text);
    // An estimate made under a larger limit still says "past this limit".
    return cached && (cached.complete || cached.limit >= this.limit) ? cached.count : undefined;
  }

  #measurement(text: string): Measurement {
    const keep = text.length >= 2 * KEEP_PREFIX_TOKENS;
    return new Measurement(text, encodingOf(this.encoding), this.limit, this.#textCap, keep);
  }

  #remember(measurement: Measurement): number {
    const measured = measurement.result();
    this.#counts.set(measurement.text, measured);
    if (measurement.tokens && measurement.count >= KEEP_PREFIX_TOKENS) {
      const { tokens, ends, counts } = measurement;
      this.#prefixes.set(measurement.text, { tokens, ends, counts });
    }
    return measured.count;
  }

  /** Tokens of a text (an estimate only for a text past the counter's limit). */
  text(text: string): number {
    if (text.length === 0) return 0;
    const cached = this.#cached(text);
    if (cached !== undefined) return cached;
    if (this.#work >= this.#workCap && text.length > ALWAYS_COUNTED) {
      return Math.ceil((text.length * this.#work) / this.#chars);
    }
    const measurement = this.#measurement(text);
    while (!measurement.done) measurement.step();
    this.#work += measurement.count;
    this.#chars += measurement.at;
    return this.#remember(measurement);
  }

  /**
   * Counts the texts ahead of a synchronous use (an assembly), pausing for the event loop every few
   * milliseconds: the counts land in the shared cache, where {@link text} finds them.
   */
  async prepare(texts: Iterable<string>): Promise<void> {
    let sliceStart = performance.now();
    for (const text of texts) {
      if (text.length <= ALWAYS_COUNTED || this.#cached(text) !== undefined) continue;
      const measurement = this.#measurement(text);
      while (!measurement.done) {
        measurement.step();
        if (performance.now() - sliceStart > SLICE_MS) {
          await new Promise((resolve) => setImmediate(resolve));
          sliceStart = performance.now();
        }
      }
      this.#remember(measurement);
    }
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

  /**
   * Tokens of `text`, which starts with the first `shared` characters of `source` (a cut of it, with a
   * marker after): the chunks of `source` wholly inside the shared part are counted already, so only
   * the rest is tokenised. Exactly what {@link text} would count, and cached like it.
   */
  textSharing(text: string, source: string, shared: number): number {
    const kept = this.#prefixes.get(source);
    if (!kept || this.#cached(text) !== undefined || !source.startsWith(text.slice(0, shared))) return this.text(text);
    // A chunk is cut the same way in both texts when its whole search window (and the character
    // after it) lies in the shared part.
    let k = -1;
    let start = 0;
    while (k + 1 < kept.ends.length && start + CHUNK_CHARS + 1 < shared) {
      k++;
      start = kept.ends[k];
    }
    if (k < 0) return this.text(text);
    const encoding = encodingOf(this.encoding);
    let count = kept.counts[k];
    let at = kept.ends[k];
    while (at < text.length) {
      const chunk = nextChunk(text, at);
      count += encoding.countTokens(text.slice(chunk.start, chunk.end), AS_TEXT);
      at = chunk.end;
    }
    this.#counts.set(text, { count, complete: true, limit: Number.POSITIVE_INFINITY });
    return count;
  }

  /**
   * The first `maxTokens` tokens of a text (decoded, so it may end mid-word). Only the part needed
   * is tokenised, or none when the text's leading tokens were kept as it was counted.
   */
  head(text: string, maxTokens: number): string {
    if (maxTokens <= 0) return "";
    const encoding = encodingOf(this.encoding);
    const kept = this.#prefixes.get(text)?.tokens;
    const keptWhole = kept !== undefined && this.#counts.get(text)?.complete === true && kept.length < PREFIX_MAX;
    let tokens: number[];
    if (kept && (kept.length > maxTokens || keptWhole)) {
      if (kept.length <= maxTokens) return text;
      tokens = kept;
    } else {
      tokens = [];
      let at = 0;
      while (at < text.length && tokens.length <= maxTokens) {
        const chunk = nextChunk(text, at);
        for (const token of encoding.encode(text.slice(chunk.start, chunk.end), AS_TEXT)) tokens.push(token);
        at = chunk.end;
      }
      if (at >= text.length && tokens.length <= maxTokens) return text;
    }
    // A cut inside a multi-byte character decodes to a replacement character; drop it.
    return encoding.decode(tokens.slice(0, maxTokens)).replace(/\uFFFD+$/, "");
  }
}

/** Token count of a request's messages for a model (the same count the assembler keeps to). */
export function countContextTokens(messages: readonly ChatMessage[], model?: string): number {
  return new TokenCounter(encodingForModel(model)).messages(messages);
}

/** Every text of messages that counting reads: contents, text parts, names, tool calls. */
export function* messageTexts(messages: Iterable<ChatMessage>): Generator<string> {
  for (const message of messages) {
    if (typeof message.content === "string") yield message.content;
    else if (Array.isArray(message.content))
      for (const part of message.content) if (typeof part.text === "string") yield part.text;
    if (typeof message.name === "string") yield message.name;
    if (Array.isArray(message.tool_calls)) for (const call of message.tool_calls) yield call.function.arguments;
  }
}
