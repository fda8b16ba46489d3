/**
 * The recall benchmark's data and its bulk loader. Messages are deterministic (seeded), so every
 * store holds the same text; vectors come from the test suite's synonym embedding computed here, in
 * process, and are written with `putEmbeddings` exactly as the background embedder would write them.
 * Loading goes through the store API (createSession, one appendMessages of the whole session, one
 * putEmbeddings), several sessions at once, so what is searched is what the store itself wrote.
 */
import { embeddingText } from "../src/core/embeddings.js";
import type { MessageInput, VectorStore } from "../src/core/types.js";
import { fakeEmbedding, SYNONYM_GROUPS } from "../test/_fake-upstream.js";
import { elapsedMs, seededRandom } from "./_harness.js";
import { sessionIdOf } from "./_store-data.js";

/** The model name vectors are stored under (the synonym embedding's 16 dimensions). */
export const BENCH_EMBEDDING_MODEL = "synonyms-16";

/** Everyday filler around the one topical word of each message (common words every owner has). */
export const FILLER = [
  "sounds good",
  "let me think about it",
  "thanks for the help",
  "what else is there",
  "okay then",
  "maybe later today",
];

/**
 * One step of a build: sessions `from..to-1` of `perSession` messages, owned `sessionsPerOwner` each by
 * owners new to this step (so every owner holds the same amount at every size), each owner's sessions
 * spread through the step rather than loaded one after another.
 */
export interface RecallBlock {
  from: number;
  to: number;
  perSession: number;
  sessionsPerOwner: number;
}

/** The owner of session `s` of `block`. */
export function ownerOf(block: RecallBlock, s: number): string {
  const owners = (block.to - block.from) / block.sessionsPerOwner;
  return `owner-${block.from / block.sessionsPerOwner + ((s - block.from) % owners)}`;
}

/** A generator of chat sentences: filler, one topical word, filler, and a unique code. */
export function sentences(seed: number): () => string {
  const random = seededRandom(seed);
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)];
  return () =>
    `${pick(FILLER)} ${pick(pick(SYNONYM_GROUPS))} ${pick(FILLER)} ${Math.floor(random() * 0xffffff)
      .toString(16)
      .padStart(6, "0")}`;
}

/** The messages of session `s`: the same for every store and run. */
export function sessionMessages(s: number, perSession: number): MessageInput[] {
  const next = sentences(1_000_003 + s);
  return Array.from({ length: perSession }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: next() }));
}

/** Options of {@link bulkLoad}. */
export interface BulkLoadOptions {
  /** Sessions in flight at once (a network store overlaps round trips). @default 8 */
  concurrency?: number;
  /** Printed with progress lines. */
  label?: string;
}

/**
 * Fills the sessions of `block`: each is created, appended in one call, and given its embeddings in
 * one call. @returns the seconds it took.
 */
export async function bulkLoad(store: VectorStore, block: RecallBlock, options: BulkLoadOptions = {}): Promise<number> {
  const { from, perSession } = block;
  const started = performance.now();
  const total = block.to - from;
  const step = Math.max(1, Math.floor(total / 10));
  let next = from;
  let done = 0;
  const worker = async () => {
    for (let s = next++; s < block.to; s = next++) {
      const id = sessionIdOf(s);
      await store.createSession({ id, userId: ownerOf(block, s) });
      const stored = await store.appendMessages(id, sessionMessages(s, perSession));
      const items = stored.map((m) => ({
        seq: m.seq,
        createdAt: m.createdAt,
        vector: fakeEmbedding(embeddingText(m)),
      }));
      await store.putEmbeddings(id, BENCH_EMBEDDING_MODEL, items);
      if (++done % step === 0) {
        const messages = (from + done) * perSession;
        console.error(
          `  ${options.label ?? store.name}: ${messages.toLocaleString("en")} messages loaded, ${elapsedMs(started)}`,
        );
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 8 }, worker));
  return (performance.now() - started) / 1000;
}
