/**
 * Memories in the context: each turn brings what is known about the user from all their sessions,
 * as one system note listing each memory with its id. All of them while the note fits the memory
 * share of the token budget; when it does not, the ones pinned by `memoryIds` first, then the most
 * related to the new message (lexical overlap; with an embedder, fused with closeness in meaning, as
 * hybrid search fuses messages), then the most recently updated, while they fit.
 */
import { reciprocalRankFusion } from "../search.js";
import type { UserMemory } from "../store-types.js";
import type { TokenCounter } from "./tokens.js";

/** How memories enter the context. */
export interface MemoryContextOptions {
  /** Bring the user's memories into each turn's context. @default true */
  enabled?: boolean;
  /** The part of the token budget the memory note may take (0..1). @default 0.1 */
  share?: number;
  /** Most memories read per turn (the most recently updated). @default 200 */
  limit?: number;
}

/** The defaults of {@link MemoryContextOptions}. */
export const DEFAULT_MEMORY_CONTEXT: Required<MemoryContextOptions> = { enabled: true, share: 0.1, limit: 200 };

/** A memory included in the context, and why. */
export interface IncludedMemory {
  id: string;
  /**
   * `all`: every memory fit; `pinned`: asked for by `memoryIds`; `related`: shares words with the new
   * message or, with an embedder, is close to it in meaning; `recent`: what room was left.
   */
  reason: "all" | "pinned" | "related" | "recent";
  /** How related (`related` only): the lexical score, or with an embedder the fused rank score. */
  score?: number;
}

/** What the memory note of a context holds. */
export interface MemoriesInContext {
  included: IncludedMemory[];
  /** Memories of the user left out for the share. */
  omitted: number;
  /** Tokens of the note. */
  tokens: number;
  /** The tokens the note could take. */
  budget: number;
  /** Pinned ids that are not (or no longer) the user's memories. */
  missingPinned?: string[];
}

const STOPWORDS = new Set(
  "a an and are as at be but by do does for from has have he her his i if in is it its me my of on or our she so that the their them they this to was we were what when where which who will with you your".split(
    " ",
  ),
);

/** Lower-case words of a text, without very common ones. */
export function words(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((w) => w.length > 1 && !STOPWORDS.has(w));
}

/**
 * The 5-letter prefixes of a query's words, made once per query set: a query is scored against every
 * memory of a user, and making them per memory cost ~200 ms of the event loop for a 12-message turn
 * against 1,000 memories (memory extraction).
 */
const prefixesOf = new WeakMap<ReadonlySet<string>, ReadonlySet<string>>();

/** How related a memory is to a query: shared words (crude stemming: a shared 5-letter prefix counts) over the memory's length. */
export function lexicalScore(query: ReadonlySet<string>, text: string): number {
  const own = new Set(words(text));
  if (own.size === 0 || query.size === 0) return 0;
  let prefixes = prefixesOf.get(query);
  if (!prefixes)
    prefixesOf.set(query, (prefixes = new Set([...query].filter((w) => w.length >= 5).map((w) => w.slice(0, 5)))));
  let hits = 0;
  for (const w of own) if (query.has(w) || (w.length >= 5 && prefixes.has(w.slice(0, 5)))) hits++;
  return hits / Math.sqrt(own.size);
}

/** The system note of memories, oldest first. */
export function renderMemoryNote(memories: readonly Pick<UserMemory, "id" | "text">[]): string {
  return (
    "What you know about the user from earlier conversations (memories, id in brackets; the user can see and correct them):\n" +
    memories.map((m) => `- [${m.id}] ${m.text.replace(/\s+/g, " ").trim()}`).join("\n")
  );
}

/**
 * How related each memory is to `query`, by id (only related ones): the lexical score; with
 * `closeness` (cosine similarity of the memories close in meaning), the reciprocal-rank fusion of the
 * lexical order and the order by meaning.
 */
export function relatedMemories(
  memories: readonly UserMemory[],
  query: string,
  closeness?: ReadonlyMap<string, number>,
): Map<string, number> {
  const words_ = new Set(words(query));
  const lexical = memories
    .map((m) => ({ m, score: lexicalScore(words_, m.text) }))
    .filter((x) => x.score > 0)
    .sort((a, b) => b.score - a.score || b.m.updatedAt - a.m.updatedAt);
  if (!closeness || closeness.size === 0) return new Map(lexical.map((x) => [x.m.id, x.score]));
  const close = memories
    .filter((m) => closeness.has(m.id))
    .sort((a, b) => closeness.get(b.id)! - closeness.get(a.id)! || b.updatedAt - a.updatedAt);
  return new Map(
    reciprocalRankFusion([lexical.map((x) => x.m), close], (m) => m.id).map(({ item, score }) => [item.id, score]),
  );
}

/**
 * Picks the memories of one turn within `budget` tokens: all when they fit, else pinned, related (see
 * {@link relatedMemories}), then recent ones while the note fits. Returns the note (null when none)
 * and the report.
 */
export function selectMemories(
  memories: readonly UserMemory[],
  request: {
    query: string;
    pinned?: readonly string[];
    budget: number;
    counter: TokenCounter;
    closeness?: ReadonlyMap<string, number>;
  },
): { note: string | null; report: MemoriesInContext } {
  const { budget, counter } = request;
  const noteTokens = (list: readonly UserMemory[]) =>
    counter.message({ role: "system", content: renderMemoryNote(list) });
  const byOldest = (list: UserMemory[]) => list.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
  const pinnedIds = new Set(request.pinned ?? []);
  const missingPinned = [...pinnedIds].filter((id) => !memories.some((m) => m.id === id));
  const extra = missingPinned.length > 0 ? { missingPinned } : {};
  if (memories.length === 0) return { note: null, report: { included: [], omitted: 0, tokens: 0, budget, ...extra } };
  const all = byOldest([...memories]);
  const whole = noteTokens(all);
  if (whole <= budget) {
    const included = all.map((m): IncludedMemory => ({ id: m.id, reason: pinnedIds.has(m.id) ? "pinned" : "all" }));
    return { note: renderMemoryNote(all), report: { included, omitted: 0, tokens: whole, budget, ...extra } };
  }
  const related = relatedMemories(memories, request.query, request.closeness);
  const scored = memories.map((m) => ({
    m,
    score: pinnedIds.has(m.id) ? Number.POSITIVE_INFINITY : (related.get(m.id) ?? 0),
  }));
  scored.sort((a, b) => b.score - a.score || b.m.updatedAt - a.m.updatedAt);
  const chosen: UserMemory[] = [];
  const reasons = new Map<string, IncludedMemory>();
  // Counted line by line (a line's tokens plus one for the line break): counting the whole note again
  // for each candidate would cost quadratic time with many memories.
  let tokens = noteTokens([]);
  for (const { m, score } of scored) {
    const line = counter.text(`- [${m.id}] ${m.text.replace(/\s+/g, " ").trim()}`) + 1;
    if (tokens + line > budget) continue;
    chosen.push(m);
    tokens += line;
    reasons.set(
      m.id,
      score === Number.POSITIVE_INFINITY
        ? { id: m.id, reason: "pinned" }
        : score > 0
          ? { id: m.id, reason: "related", score: Math.round(score * 10_000) / 10_000 }
          : { id: m.id, reason: "recent" },
    );
  }
  if (chosen.length === 0)
    return { note: null, report: { included: [], omitted: memories.length, tokens: 0, budget, ...extra } };
  const ordered = byOldest(chosen);
  tokens = noteTokens(ordered);
  return {
    note: renderMemoryNote(ordered),
    report: {
      included: ordered.map((m) => reasons.get(m.id) as IncludedMemory),
      omitted: memories.length - chosen.length,
      tokens,
      budget,
      ...extra,
    },
  };
}
