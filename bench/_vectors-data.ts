/**
 * The data of the `vectors` bench: one owner's messages with vectors drawn from a Gaussian mixture,
 * and the exact top 10 of each query computed while filling. A database filled once can be kept
 * (`BENCH_VECTORS_DB=<folder>`) and measured again: a million vectors take 20–40 minutes to write.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { newSessionId } from "../src/core/ids.js";
import type { VectorStore } from "../src/core/types.js";
import { createSqliteStore } from "../src/stores/sqlite/index.js";
import { seededRandom } from "./_harness.js";

export const MODEL = "bench-embedding";
export const K = 10;
const PER_SESSION = 100;

/** The mixture: `centres` random unit centres, a message its centre plus isotropic noise of norm `spread`, normalised. */
export interface MixtureOptions {
  dims: number;
  centres: number;
  spread: number;
  seed: number;
  /** The noise's seed (the centres' is `seed`): another draw around the same centres. @default seed */
  noiseSeed?: number;
}

/** Draws normalised vectors from the mixture. */
export function mixture({ dims, centres: count, spread, seed, noiseSeed }: MixtureOptions): () => Float32Array {
  let random = seededRandom(seed);
  let spare: number | undefined;
  const gauss = () => {
    if (spare !== undefined) {
      const s = spare;
      spare = undefined;
      return s;
    }
    const u = 1 - random();
    const v = random();
    const r = Math.sqrt(-2 * Math.log(u));
    spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  };
  const unit = (v: Float32Array) => {
    let n = 0;
    for (let i = 0; i < v.length; i++) n += v[i] * v[i];
    const s = 1 / Math.sqrt(n);
    for (let i = 0; i < v.length; i++) v[i] *= s;
    return v;
  };
  const centres = Array.from({ length: count }, () => unit(Float32Array.from({ length: dims }, gauss)));
  if (noiseSeed !== undefined && noiseSeed !== seed) {
    random = seededRandom(noiseSeed);
    spare = undefined;
  }
  const noise = spread / Math.sqrt(dims);
  return () => {
    const c = centres[Math.floor(random() * centres.length)];
    const v = new Float32Array(dims);
    for (let i = 0; i < dims; i++) v[i] = c[i] + noise * gauss();
    return unit(v);
  };
}

/** The running exact top K of one query (the store scores float32 vectors by a double dot product). */
export class Truth {
  keys: string[] = [];
  scores: number[] = [];
  constructor(readonly query: Float32Array) {}
  offer(key: string, v: Float32Array) {
    let s = 0;
    for (let i = 0; i < v.length; i++) s += v[i] * this.query[i];
    if (this.scores.length === K && s <= this.scores[K - 1]) return;
    let at = this.scores.length;
    while (at > 0 && this.scores[at - 1] < s) at--;
    this.scores.splice(at, 0, s);
    this.keys.splice(at, 0, key);
    if (this.scores.length > K) {
      this.scores.pop();
      this.keys.pop();
    }
  }
}

/** Fills one owner's sessions with `count` messages and their vectors; offers each to `truths`. */
export async function fill(
  store: VectorStore,
  owner: string,
  count: number,
  draw: () => Float32Array,
  truths: Truth[] = [],
) {
  for (let done = 0; done < count; done += PER_SESSION) {
    const n = Math.min(PER_SESSION, count - done);
    const session = await store.createSession({ id: newSessionId(), userId: owner });
    const added = await store.appendMessages(
      session.id,
      Array.from({ length: n }, (_, i) => ({ role: "user" as const, content: `message ${done + i}` })),
    );
    const vectors = added.map(() => draw());
    await store.putEmbeddings(
      session.id,
      MODEL,
      added.map((m, i) => ({ seq: m.seq, createdAt: m.createdAt, vector: vectors[i] })),
    );
    const keys = added.map((m) => `${session.id}:${m.seq}`);
    for (const t of truths) for (let i = 0; i < n; i++) t.offer(keys[i], vectors[i]);
    if ((done + n) % 100_000 === 0) console.error(`    ${(done + n).toLocaleString("en")} vectors`);
  }
}

/** A filled database: its file, the queries, their exact answers, and how long the fill took. */
export interface FilledDatabase {
  path: string;
  queries: Float32Array[];
  truths: Truth[];
  fillSeconds: number;
  /** The draw, continued past the fill (for vectors added later). */
  draw: () => Float32Array;
}

/**
 * Fills `<folder>/vectors-<dims>-<size>.db` (owner `big` with `size` vectors, and an owner
 * `small-<n>` of each of `smallOwners`), or reuses it when a finished fill left its `.json` beside it.
 */
export async function filledDatabase(options: {
  folder: string;
  dims: number;
  size: number;
  queries: number;
  smallOwners: number[];
  centres: number;
  spread: number;
}): Promise<FilledDatabase> {
  const { folder, dims, size } = options;
  mkdirSync(folder, { recursive: true });
  const name = `vectors-${dims}-${size}-c${options.centres}-s${options.spread}${options.smallOwners.length > 0 ? "" : "-alone"}`;
  const path = join(folder, `${name}.db`);
  const saved = join(folder, `${name}.json`);
  const draw = mixture({ dims, centres: options.centres, spread: options.spread, seed: 1000 + dims });
  const queries = Array.from({ length: options.queries }, draw);
  if (existsSync(saved)) {
    const data = JSON.parse(readFileSync(saved, "utf8")) as { keys: string[][]; fillSeconds: number };
    if (data.keys.length >= queries.length) {
      const truths = queries.map((q, i) => Object.assign(new Truth(q), { keys: data.keys[i] }));
      // The draw continues from a different seed: the stored vectors' sequence is not replayed.
      return {
        path,
        queries,
        truths,
        fillSeconds: data.fillSeconds,
        draw: mixture({ dims, centres: options.centres, spread: options.spread, seed: 7000 + dims }),
      };
    }
  }
  const truths = queries.map((q) => new Truth(q));
  const store = createSqliteStore({ path, vectorIndex: false, backgroundCheckpoints: false });
  try {
    const start = performance.now();
    await fill(store, "big", size, draw, truths);
    const fillSeconds = (performance.now() - start) / 1000;
    for (const n of options.smallOwners) await fill(store, `small-${n}`, n, draw);
    writeFileSync(saved, JSON.stringify({ keys: truths.map((t) => t.keys), fillSeconds }));
    return { path, queries, truths, fillSeconds, draw };
  } finally {
    await store.close();
  }
}
