/**
 * The cells of the SQLite and PostgreSQL stores' IVF vector indexes: spherical k-means over a sample of
 * an owner's normalised vectors, the nearest cells of a vector, and int8 quantisation. Pure code, no
 * database (`sqlite/_vector-index.ts`, `postgres/_ivf.ts`).
 *
 * Finding a vector's nearest centroid exactly costs `cells × dims` multiplications (768,000 at a
 * thousand cells of 768 dimensions: a millisecond in JavaScript, twenty minutes for a million vectors).
 * With many cells, a random projection to {@link PROJECTED} dimensions shortlists {@link SHORTLIST}
 * centroids first, and only those are scored exactly: about a tenth of the work, and the nearest cell
 * is still found for nearly every vector (the shortlist misses only centroids whose exact score is
 * close to the winner's, which changes little for a search probing several cells).
 */

/** The dot product of `a` (from `i`) and `b` (from `j`) over `n` numbers; four sums, so V8 runs it about 1.6× faster. */
function dotAt(a: Float32Array, i: number, b: Float32Array, j: number, n: number): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let k = 0;
  for (; k + 3 < n; k += 4) {
    s0 += a[i + k] * b[j + k];
    s1 += a[i + k + 1] * b[j + k + 1];
    s2 += a[i + k + 2] * b[j + k + 2];
    s3 += a[i + k + 3] * b[j + k + 3];
  }
  for (; k < n; k++) s0 += a[i + k] * b[j + k];
  return s0 + s1 + s2 + s3;
}

/** Dimensions of the projection that shortlists centroids (a multiple of 4). */
const PROJECTED = 32;
/** Centroids scored exactly after the projection. */
const SHORTLIST = 16;
/** Below this many cells every centroid is scored exactly. */
const EXACT_BELOW = 96;

/** Centroids (`cells × dims`, each of length 1) and the nearest cells of a vector. */
export class Cells {
  readonly cells: number;
  readonly #projection: Float32Array | undefined;
  readonly #projected: Float32Array | undefined;
  readonly #pv = new Float32Array(PROJECTED);

  constructor(
    readonly centroids: Float32Array,
    readonly dims: number,
  ) {
    this.cells = centroids.length / dims;
    if (this.cells >= EXACT_BELOW) {
      // A fixed seed: the projection is derived, never stored, and must be the same in every process.
      const random = gaussian(0x1f2e3d);
      this.#projection = Float32Array.from({ length: dims * PROJECTED }, random);
      this.#projected = new Float32Array(this.cells * PROJECTED);
      for (let c = 0; c < this.cells; c++) this.#project(centroids, c * dims, this.#projected, c * PROJECTED);
    }
  }

  #project(from: Float32Array, at: number, to: Float32Array, into: number): void {
    const r = this.#projection!;
    for (let p = 0; p < PROJECTED; p++) to[into + p] = dotAt(from, at, r, p * this.dims, this.dims);
  }

  /** The dot product of centroid `cell` with `v` (at offset `at`). */
  score(cell: number, v: Float32Array, at = 0): number {
    return dotAt(this.centroids, cell * this.dims, v, at, this.dims);
  }

  /** The cell whose centroid is nearest to `v` (at offset `at`), shortlisted by the projection when there are many. */
  nearest(v: Float32Array, at = 0): number {
    if (!this.#projected) {
      let best = 0;
      let bestScore = Number.NEGATIVE_INFINITY;
      for (let c = 0; c < this.cells; c++) {
        const s = this.score(c, v, at);
        if (s > bestScore) [best, bestScore] = [c, s];
      }
      return best;
    }
    const pv = this.#pv;
    this.#project(v, at, pv, 0);
    const shortlist = new Best(SHORTLIST);
    const projected = this.#projected;
    for (let c = 0; c < this.cells; c++) shortlist.offer(c, dotAt(projected, c * PROJECTED, pv, 0, PROJECTED));
    let best = shortlist.ids[0];
    let bestScore = Number.NEGATIVE_INFINITY;
    for (const c of shortlist.ids) {
      const s = this.score(c, v, at);
      if (s > bestScore) [best, bestScore] = [c, s];
    }
    return best;
  }

  /** The `n` cells nearest to `v`, nearest first (every centroid scored exactly: a search does this once). */
  nearestCells(v: Float32Array, n: number): number[] {
    const best = new Best(Math.min(n, this.cells));
    for (let c = 0; c < this.cells; c++) best.offer(c, this.score(c, v));
    return best.ids;
  }
}

/** The best `n` ids by score, kept sorted (n is small). */
class Best {
  readonly ids: number[] = [];
  readonly scores: number[] = [];
  constructor(readonly n: number) {}
  offer(id: number, score: number): void {
    if (this.ids.length === this.n && score <= this.scores[this.n - 1]) return;
    let at = this.ids.length;
    while (at > 0 && this.scores[at - 1] < score) at--;
    this.ids.splice(at, 0, id);
    this.scores.splice(at, 0, score);
    if (this.ids.length > this.n) {
      this.ids.pop();
      this.scores.pop();
    }
  }
}

/** Seeded standard normal numbers (mulberry32 and Box–Muller). */
export function gaussian(seed: number): () => number {
  const random = uniform(seed);
  return () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

/** Seeded uniform numbers in [0, 1) (mulberry32). */
export function uniform(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Options of {@link trainCells}. */
export interface TrainOptions {
  /** How many cells (at most the sample's size). */
  cells: number;
  /** Rounds of assignment and update. @default 4 */
  iterations?: number;
  /** Seeds the initial centroids and the reseeding of empty cells. @default 1 */
  seed?: number;
}

/**
 * Spherical k-means: centroids of length 1 over `sample` (`n × dims` normalised vectors, packed),
 * started from distinct sample vectors; a cell left empty is reseeded with a random sample vector.
 */
export function trainCells(sample: Float32Array, dims: number, options: TrainOptions): Cells {
  const steps = trainSteps(sample, dims, options);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/**
 * {@link trainCells} in slices: the generator yields after every `sliceVectors` vectors assigned, so an
 * async caller can give the event loop back between slices (a training of a thousand cells of 768
 * dimensions is seconds of CPU); its return value is the cells.
 */
export function* trainSteps(
  sample: Float32Array,
  dims: number,
  options: TrainOptions,
  sliceVectors = 256,
): Generator<void, Cells> {
  const n = sample.length / dims;
  const k = Math.max(1, Math.min(options.cells, n));
  const random = uniform(options.seed ?? 1);
  const pick = () => Math.floor(random() * n);
  let centroids = new Float32Array(k * dims);
  // A partial Fisher–Yates shuffle: k distinct sample vectors.
  const order = Int32Array.from({ length: n }, (_, i) => i);
  for (let c = 0; c < k; c++) {
    const j = c + Math.floor(random() * (n - c));
    [order[c], order[j]] = [order[j], order[c]];
    centroids.set(sample.subarray(order[c] * dims, (order[c] + 1) * dims), c * dims);
  }
  const assigned = new Int32Array(n);
  for (let round = 0; round < (options.iterations ?? 4); round++) {
    const cells = new Cells(centroids, dims);
    for (let i = 0; i < n; i++) {
      assigned[i] = cells.nearest(sample, i * dims);
      if (i % sliceVectors === sliceVectors - 1) yield;
    }
    const sums = new Float64Array(k * dims);
    const counts = new Int32Array(k);
    for (let i = 0; i < n; i++) {
      const c = assigned[i];
      counts[c]++;
      for (let d = 0, o = i * dims, s = c * dims; d < dims; d++) sums[s + d] += sample[o + d];
    }
    const next = new Float32Array(k * dims);
    for (let c = 0; c < k; c++) {
      if (counts[c] === 0) {
        const i = pick();
        next.set(sample.subarray(i * dims, (i + 1) * dims), c * dims);
        continue;
      }
      let norm = 0;
      for (let d = 0; d < dims; d++) norm += sums[c * dims + d] ** 2;
      const scale = norm > 0 ? 1 / Math.sqrt(norm) : 0;
      for (let d = 0; d < dims; d++) next[c * dims + d] = sums[c * dims + d] * scale;
    }
    centroids = next;
  }
  return new Cells(centroids, dims);
}

/** A normalised vector as int8 at `scale` (components past ±127/scale are clipped; the re-score is exact). */
export function quantize(vector: Float32Array, scale: number): Buffer {
  const out = Buffer.alloc(vector.length);
  for (let i = 0; i < vector.length; i++)
    out.writeInt8(Math.max(-127, Math.min(127, Math.round(vector[i] * scale))), i);
  return out;
}

/** The int8 scale of a sample: its 99.9th percentile magnitude maps to 127. */
export function scaleOf(sample: Float32Array): number {
  const step = Math.max(1, Math.floor(sample.length / 200_000));
  // A typed array sorts natively, without a comparator call per comparison: 200,000 magnitudes sorted
  // as numbers with one held the event loop ~220 ms in a PostgreSQL build (load 17 on 2 cores).
  const magnitudes = new Float32Array(Math.ceil(sample.length / step));
  for (let i = 0, j = 0; i < sample.length; i += step, j++) magnitudes[j] = Math.abs(sample[i]);
  magnitudes.sort();
  const top = magnitudes[Math.min(magnitudes.length - 1, Math.floor(magnitudes.length * 0.999))] || 1;
  return 127 / top;
}
