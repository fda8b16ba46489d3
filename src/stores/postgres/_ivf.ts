/**
 * The PostgreSQL store's IVF index over large owners' message vectors (schema version 20,
 * `migrations/020-vector-cells.ts`), the idea of the SQLite store's (`sqlite/_vector-index.ts`) without
 * pgvector, which Debian's PostgreSQL packages do not ship:
 *
 * - An owner whose vectors of a model reach `minOwnerVectors` (sized when it is searched) gets a training, built
 *   in the background ({@link VectorIndexer}): about √n cells by spherical k-means on a sample
 *   (`stores/_kmeans.ts`), then every vector's nearest cell and int8 code written to `vector_codes`,
 *   a bounded batch per statement. The CPU work runs in slices that give the event loop back; no
 *   search or write waits for a build (they use the exact scan, or the previous training, meanwhile).
 * - A search probes in this process, not in SQL: it scores the centroids (cached per training), reads
 *   the codes of the nearest cells through the primary key, scores them as int8 here, and re-scores the
 *   best `candidates` exactly from their float vectors. A dot product over `unnest` costs 85–390 µs a
 *   768-dimension vector in PostgreSQL (docs/benchmarks/vectors.md), an int8 one here about a
 *   microsecond.
 * - Writers keep it current: `putVectors` gives each vector it writes a code in each of the owner's
 *   trainings, under a shared advisory lock a build takes exclusively while it registers its training,
 *   so a vector is either there before the build reads the owner or written with its code. Deletions
 *   go by the foreign keys; an owner's trainings go with its last session.
 * - An owner grown to `retrainAfter` times the vectors it was trained on is trained again, checked in
 *   the background at most once a minute per owner; the new training replaces the old once complete.
 *
 * Where the `vector` extension (pgvector 0.5.0 or later) is installed, or can be created, pgvector's
 * HNSW index is built for a large owner instead (`postgres/_hnsw.ts`); {@link VectorIndexer.describe}
 * says which is in use (`/readyz`).
 */
import { setImmediate as nextTurn } from "node:timers/promises";
import type { Message, VectorHit, VectorQuery } from "../../core/types.js";
import { Cells, quantize, scaleOf, trainSteps } from "../_kmeans.js";
import { normalize, vectorHit } from "../_vectors.js";
import { DEFAULT_SEARCH_LIMIT } from "../_util.js";
import { claimBuild } from "./_build-claim.js";
import type { PgSql } from "./_client.js";
import type { PgRun } from "./_operations.js";
import { type MessageRow, toMessage } from "./_rows.js";
import { createHnswTables, findPgvector, hnswBuild, hnswSearch, hnswWritten, type Pgvector } from "./_hnsw.js";

/** How the index is used; `false` turns it off (every search scans exactly). */
export interface PostgresVectorIndexOptions {
  /** An owner's vectors of a model are indexed once it holds at least this many (smaller ones are scanned exactly). @default 5000 */
  minOwnerVectors?: number;
  /** Cells probed per search (more when needed to read `minProbedVectors`). @default 8 */
  probes?: number;
  /** Vectors a search reads at least, in whole cells. @default 3000 */
  minProbedVectors?: number;
  /** Candidates re-scored exactly from their float vectors (at least the search's limit). @default 64 */
  candidates?: number;
  /** An owner is trained again once it holds this many times the vectors it was trained on. @default 2 */
  retrainAfter?: number;
  /**
   * Use pgvector's HNSW index instead of the IVF when the `vector` extension is installed in the
   * database or can be created (pgvector 0.5.0 or later); `false` keeps the IVF. @default true
   */
  pgvector?: boolean;
}

/** Which index a store's large owners are searched through (`/readyz` details). */
export interface VectorIndexKind {
  /** `pgvector-hnsw`, `ivf-sql` (the IVF of this file, without pgvector) or `exact` (no index: `vectorIndex: false`). */
  kind: "pgvector-hnsw" | "ivf-sql" | "exact";
  /** The pgvector version in use, or why pgvector is not used. */
  pgvector: string;
}

const DEFAULT_MIN_OWNER_VECTORS = 5_000;
const DEFAULT_PROBES = 8;
const DEFAULT_MIN_PROBED = 3_000;
const DEFAULT_CANDIDATES = 64;
const DEFAULT_RETRAIN_AFTER = 2;
/** Training vectors per cell. */
const SAMPLE_PER_CELL = 24;
/** Vectors read, coded and written per statement of a build. */
const BATCH = 500;
/** Vectors assigned to cells between two gives of the event loop. */
const SLICE = 256;
/** A training left unfinished this long (its process died) may be replaced by another build. */
const STALE_BUILD_MS = 10 * 60_000;
/** How often (at most) a process counts an indexed owner's vectors to see whether it grew. */
const GROWTH_CHECK_MS = 60_000;

/** The advisory lock of an owner's trainings (shared by writers, exclusive while a build registers). */
const lockOf = (sql: PgSql, userId: string, shared: boolean) =>
  shared
    ? sql`SELECT pg_advisory_xact_lock_shared(hashtext('threadkeep.ivf'), hashtext(${userId}))`
    : sql`SELECT pg_advisory_xact_lock(hashtext('threadkeep.ivf'), hashtext(${userId}))`;

interface Training {
  id: number;
  scale: number;
  trained: number;
  cells: Cells;
}

/** Reads a packed float32 buffer (bytea) as numbers. */
function floats(packed: Uint8Array): Float32Array {
  const copy = new Uint8Array(packed.byteLength);
  copy.set(packed);
  return new Float32Array(copy.buffer);
}

/** An int[] literal: postgres.js sends a number array for an int[] the server described as the array's text. */
const intArray = (values: number[]) => `{${values.join(",")}}`;

/** The int8 dot product of two codes. */
function dot8(a: Int8Array, b: Int8Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/**
 * The store's index: the trainings' cells as this process read them, the searches that use them, and
 * the background builds.
 */
export class VectorIndexer {
  readonly #run: PgRun;
  readonly #options: PostgresVectorIndexOptions;
  readonly #enabled: boolean;
  readonly #cells = new Map<number, Training>();
  readonly #queue = new Map<string, { userId: string; model: string; count: number }>();
  readonly #checked = new Map<string, number>();
  #building: Promise<void> | null = null;
  #closed = false;
  /** pgvector, once found when the store opened; else why not. */
  #pg: Pgvector | null = null;
  #pgReason = "not checked yet (the store has not connected)";

  constructor(run: PgRun, options: PostgresVectorIndexOptions | false | undefined) {
    this.#run = run;
    this.#enabled = options !== false;
    this.#options = options || {};
  }

  /**
   * Looks for pgvector (called when the store opens, after its migrations) and creates the HNSW tables
   * when it is there. Never fails: without it the IVF is used, and {@link describe} says why.
   */
  async detect(sql: PgSql): Promise<void> {
    if (!this.#enabled) return void (this.#pgReason = "not used: vectorIndex is false (every search scans exactly)");
    if (this.#options.pgvector === false) return void (this.#pgReason = "not used: vectorIndex.pgvector is false");
    try {
      const found = await findPgvector(sql);
      if (typeof found === "string") {
        this.#pg = null;
        this.#pgReason = `not used: ${found}`;
        return;
      }
      await createHnswTables(sql, found);
      this.#pg = found;
      this.#pgReason = found.version;
    } catch (error) {
      this.#pg = null;
      this.#pgReason = `not used: ${(error as Error).message}`;
    }
  }

  /** Which index large owners are searched through, and pgvector's version or why it is not used. */
  describe(): VectorIndexKind {
    const kind = !this.#enabled ? "exact" : this.#pg ? "pgvector-hnsw" : "ivf-sql";
    return { kind, pgvector: this.#pgReason };
  }

  get #minOwner(): number {
    return this.#options.minOwnerVectors ?? DEFAULT_MIN_OWNER_VECTORS;
  }

  /** A training's cells, read once per process. */
  async #training(
    sql: PgSql,
    row: { id: number | string; scale: number; trained: number; dims: number },
  ): Promise<Training> {
    const id = Number(row.id);
    let t = this.#cells.get(id);
    if (!t) {
      const [body] = await sql<{ centroids: Buffer }[]>`SELECT centroids FROM vector_ivf WHERE id = ${id}`;
      t = { id, scale: row.scale, trained: row.trained, cells: new Cells(floats(body.centroids), row.dims) };
      this.#cells.set(id, t);
    }
    return t;
  }

  /**
   * Writes the codes of vectors just stored (normalised, with their seqs) into each of the owner's
   * trainings; called in the writing transaction, after the vectors.
   */
  async written(
    tx: PgSql,
    userId: string,
    sessionId: string,
    model: string,
    items: { seq: number; vector: Float32Array }[],
  ): Promise<void> {
    await lockOf(tx, userId, true);
    if (this.#pg) return hnswWritten(tx, this.#pg, userId, sessionId, model, items);
    const rows = await tx<{ id: string; scale: number; trained: number; dims: number }[]>`
      SELECT id, scale, trained, dims FROM vector_ivf WHERE user_id = ${userId} AND model = ${model}`;
    if (rows.length === 0) return;
    const seqs = items.map((i) => i.seq);
    await tx`DELETE FROM vector_codes WHERE session_id = ${sessionId} AND seq = ANY(${seqs}::bigint[])`;
    for (const row of rows) {
      const t = await this.#training(tx, row);
      await tx`
        INSERT INTO vector_codes (ivf, cell, session_id, seq, code)
        SELECT ${t.id}, u.cell, v.session_id, v.seq, decode(u.code, 'hex')
        FROM unnest(${seqs}::bigint[], ${intArray(items.map((i) => t.cells.nearest(i.vector)))}::int[], ${items.map((i) => quantize(i.vector, t.scale).toString("hex"))}::text[]) AS u(seq, cell, code)
        JOIN message_vectors v ON v.session_id = ${sessionId} AND v.seq = u.seq AND v.model = ${model}
        ON CONFLICT DO NOTHING`;
    }
  }

  /**
   * The owner's nearest messages through its latest complete training, or undefined when it has none
   * (or the query is one session's, or the probed cells held fewer eligible vectors than the limit):
   * the caller then scans exactly.
   */
  async search(sql: PgSql, query: VectorQuery): Promise<VectorHit[] | undefined> {
    if (!this.#enabled || query.sessionId !== undefined) return undefined;
    if (this.#pg) {
      const limit = Math.max(0, Math.floor(query.limit ?? DEFAULT_SEARCH_LIMIT));
      const hits = await hnswSearch(sql, this.#pg, query, limit, this.#options.candidates ?? DEFAULT_CANDIDATES);
      if (hits === null) await this.#size(sql, query);
      return hits ?? undefined;
    }
    const [row] = await sql<{ id: string; scale: number; trained: number; dims: number }[]>`
      SELECT id, scale, trained, dims FROM vector_ivf WHERE user_id = ${query.userId} AND model = ${query.model} AND ready
      ORDER BY id DESC LIMIT 1`;
    if (!row) {
      await this.#size(sql, query);
      return undefined;
    }
    const t = await this.#training(sql, row);
    this.#checkGrowth(query.userId, query.model, t.trained);
    const limit = Math.max(0, Math.floor(query.limit ?? DEFAULT_SEARCH_LIMIT));
    if (limit === 0) return [];
    const q = normalize(query.vector);
    const cellCount = t.cells.cells;
    const enough = Math.ceil(
      ((this.#options.minProbedVectors ?? DEFAULT_MIN_PROBED) * cellCount) / Math.max(1, t.trained),
    );
    const probes = Math.max(
      1,
      Math.min(cellCount, Math.max(Math.floor(this.#options.probes ?? DEFAULT_PROBES), enough)),
    );
    const cells = t.cells.nearestCells(q, probes);
    // A training's codes are its owner's (the build reads the owner's sessions, a writer codes into its
    // owner's trainings), so the probe reads the cells alone: joined to the sessions, the plan went by
    // session (2,500 index probes, 245 ms at 250,000 vectors, against 8 ranges of the primary key);
    // ownership is checked again on the candidates below. The session join stays for `activeSince`.
    const codes = await sql<{ session_id: string; seq: number; code: Buffer }[]>`
      SELECT c.session_id, c.seq, c.code FROM vector_codes c
      ${query.activeSince === undefined ? sql`` : sql`JOIN sessions s ON s.id = c.session_id AND s.user_id = ${query.userId} AND s.last_activity_at >= ${Math.ceil(query.activeSince)}`}
      WHERE c.ivf = ${t.id} AND c.cell = ANY(${intArray(cells)}::int[])
      ${query.afterSeq === undefined ? sql`` : sql`AND c.seq > ${query.afterSeq}`}
      ${query.beforeSeq === undefined ? sql`` : sql`AND c.seq < ${query.beforeSeq}`}`;
    if (codes.length < limit) return undefined;
    const qc = new Int8Array(quantize(q, t.scale));
    const scored = codes.map((c, i) => ({
      i,
      s: dot8(new Int8Array(c.code.buffer, c.code.byteOffset, c.code.byteLength), qc),
    }));
    scored.sort((a, b) => b.s - a.s);
    const best = scored
      .slice(0, Math.max(limit, Math.floor(this.#options.candidates ?? DEFAULT_CANDIDATES)))
      .map((x) => codes[x.i]);
    const rows = await sql<(MessageRow & { session_id: string; vector: number[] })[]>`
      SELECT m.session_id, m.seq, m.created_at, m.body, v.vector
      FROM unnest(${best.map((b) => b.session_id)}::text[], ${best.map((b) => b.seq)}::bigint[]) AS u(session_id, seq)
      JOIN sessions s ON s.id = u.session_id AND s.user_id = ${query.userId}
      JOIN message_vectors v ON v.session_id = u.session_id AND v.seq = u.seq AND v.model = ${query.model}
      JOIN messages m ON m.session_id = v.session_id AND m.seq = v.seq AND m.created_at = v.created_at`;
    const hits = rows.map((r) => {
      let s = 0;
      for (let i = 0; i < q.length; i++) s += q[i] * r.vector[i];
      return { row: r, score: s };
    });
    hits.sort((a, b) => b.score - a.score || Number(b.row.seq) - Number(a.row.seq));
    if (hits.length < limit) return undefined;
    return hits.slice(0, limit).map(({ row: r, score }) => vectorHit(r.session_id, toMessage(r) as Message, score));
  }

  /**
   * An owner without a training: sized from its sessions' last seqs (an upper bound of its messages,
   * read through the owner's index), and when that reaches `minOwnerVectors` a build is queued, which
   * counts the vectors themselves. Not from the exact scan: past its bound the scan times out.
   */
  async #size(sql: PgSql, query: VectorQuery): Promise<void> {
    if (this.#closed || this.#queue.has(`${query.model}\n${query.userId}`)) return;
    const [row] = await sql<{ messages: number }[]>`
      SELECT coalesce(sum(last_seq), 0)::float8 AS messages FROM sessions WHERE user_id = ${query.userId}`;
    if (row.messages >= this.#minOwner) this.#request(query.userId, query.model, 0);
  }

  #request(userId: string, model: string, count: number): void {
    const key = `${model}\n${userId}`;
    if (this.#queue.has(key)) return;
    this.#queue.set(key, { userId, model, count });
    this.#building ??= this.#drain().finally(() => (this.#building = null));
  }

  /** Counts an indexed owner's vectors now and then, in the background; trains again when grown. */
  #checkGrowth(userId: string, model: string, trained: number): void {
    const key = `${model}\n${userId}`;
    const now = Date.now();
    if (this.#closed || (this.#checked.get(key) ?? 0) > now - GROWTH_CHECK_MS) return;
    this.#checked.set(key, now);
    const factor = this.#options.retrainAfter ?? DEFAULT_RETRAIN_AFTER;
    this.#run(
      "vectorIndexGrowth",
      async (sql) => {
        const [row] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM sessions s JOIN message_vectors v ON v.session_id = s.id WHERE s.user_id = ${userId} AND v.model = ${model}`;
        if (row.n >= trained * factor) this.#request(userId, model, row.n);
      },
      { background: true },
    ).catch(() => {});
  }

  /** Waits for the build under way (none is started afterwards). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#queue.clear();
    await this.#building;
  }

  /** Waits until no build is queued or running (for tests and benchmarks). */
  async idle(): Promise<void> {
    while (this.#building) await this.#building;
  }

  async #drain(): Promise<void> {
    while (!this.#closed && this.#queue.size > 0) {
      const [key, job] = this.#queue.entries().next().value!;
      try {
        await this.#build(job.userId, job.model, job.count);
      } catch {
        // Dropped: the next exact scan (or growth check) asks again.
      } finally {
        this.#queue.delete(key);
      }
    }
  }

  /** Trains the owner's cells and codes its vectors, then makes the training the one searches use. */
  async #build(userId: string, model: string, count: number): Promise<void> {
    const run = <T>(what: string, fn: (sql: PgSql) => Promise<T>) => this.#run(what, fn, { background: true });
    if (count === 0) {
      const [counted] = await run(
        "vectorIndexCount",
        (sql) => sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM sessions s JOIN message_vectors v ON v.session_id = s.id WHERE s.user_id = ${userId} AND v.model = ${model}`,
      );
      count = counted.n;
      if (count < this.#minOwner) return;
    }
    const [dimsRow] = await run(
      "vectorIndexDims",
      (sql) => sql<{ dims: number }[]>`SELECT dims FROM embedding_models WHERE model = ${model}`,
    );
    if (!dimsRow) return;
    const dims = dimsRow.dims;
    if (this.#pg) {
      const pg = this.#pg;
      return hnswBuild(
        (what, fn, timeoutMs) => this.#run(what, fn, { background: true, timeoutMs }),
        pg,
        userId,
        model,
        dims,
        (tx) => lockOf(tx, userId, false),
        () => this.#closed,
        // A graph of a million vectors takes longer than a training to build.
        6 * STALE_BUILD_MS,
      );
    }
    const cellCount = Math.max(1, Math.round(Math.sqrt(count)));
    const wanted = Math.min(count, cellCount * SAMPLE_PER_CELL);
    // The sample: keys first (no vector is read to be dropped), then their vectors in batches.
    const keys = await run(
      "vectorIndexSample",
      (sql) => sql<{ session_id: string; seq: number }[]>`
      SELECT v.session_id, v.seq FROM sessions s JOIN message_vectors v ON v.session_id = s.id
      WHERE s.user_id = ${userId} AND v.model = ${model} ORDER BY random() LIMIT ${wanted}`,
    );
    const sample = new Float32Array(keys.length * dims);
    let sampled = 0;
    for (let at = 0; at < keys.length && !this.#closed; at += BATCH) {
      const part = keys.slice(at, at + BATCH);
      const rows = await run(
        "vectorIndexSample",
        (sql) => sql<{ vector: number[] }[]>`
        SELECT v.vector FROM unnest(${part.map((k) => k.session_id)}::text[], ${part.map((k) => k.seq)}::bigint[]) AS u(session_id, seq)
        JOIN message_vectors v ON v.session_id = u.session_id AND v.seq = u.seq`,
      );
      for (const r of rows) if (r.vector.length === dims) sample.set(r.vector, sampled++ * dims);
      await nextTurn();
    }
    if (sampled === 0 || this.#closed) return;
    const data = sample.subarray(0, sampled * dims);
    const steps = trainSteps(data, dims, { cells: cellCount, seed: count }, SLICE);
    let step = steps.next();
    while (!step.done) {
      await nextTurn();
      if (this.#closed) return;
      step = steps.next();
    }
    const cells = step.value;
    const scale = scaleOf(data);
    const centroids = Buffer.from(cells.centroids.buffer, cells.centroids.byteOffset, cells.centroids.byteLength);
    // Registered under the exclusive lock: a writer either committed before (its vector is read below)
    // or sees this training and codes its vectors itself.
    const id = await run("vectorIndexStart", (sql) =>
      claimBuild(sql, {
        table: "vector_ivf",
        userId,
        model,
        staleMs: STALE_BUILD_MS,
        lock: (tx) => lockOf(tx, userId, false),
        columns: { trained: count, scale, dims, centroids },
      }),
    );
    if (id === undefined) return;
    this.#cells.set(id, { id, scale, trained: count, cells });
    const sessions = await run(
      "vectorIndexSessions",
      (sql) => sql<{ id: string }[]>`SELECT id FROM sessions WHERE user_id = ${userId} ORDER BY id`,
    );
    for (const { id: sessionId } of sessions) {
      let after = -1;
      for (;;) {
        if (this.#closed) return;
        const rows = await run(
          "vectorIndexRead",
          (sql) => sql<{ seq: number; vector: number[] }[]>`
          SELECT seq, vector FROM message_vectors WHERE session_id = ${sessionId} AND seq > ${after} AND model = ${model} ORDER BY seq LIMIT ${BATCH}`,
        );
        if (rows.length === 0) break;
        const seqs: number[] = [];
        const cellIds: number[] = [];
        const codes: string[] = [];
        for (let i = 0; i < rows.length; i++) {
          const v = normalize(rows[i].vector);
          seqs.push(rows[i].seq);
          cellIds.push(cells.nearest(v));
          codes.push(quantize(v, scale).toString("hex"));
          if (i % SLICE === SLICE - 1) await nextTurn();
        }
        await run(
          "vectorIndexWrite",
          (sql) => sql`
          INSERT INTO vector_codes (ivf, cell, session_id, seq, code)
          SELECT ${id}, u.cell, ${sessionId}, u.seq, decode(u.code, 'hex') FROM unnest(${seqs}::bigint[], ${intArray(cellIds)}::int[], ${codes}::text[]) AS u(seq, cell, code)
          JOIN message_vectors v ON v.session_id = ${sessionId} AND v.seq = u.seq AND v.model = ${model}
          ON CONFLICT DO NOTHING`,
        );
        after = Number(rows[rows.length - 1].seq);
        if (rows.length < BATCH) break;
      }
    }
    const older = await run(
      "vectorIndexReady",
      (sql) =>
        sql.begin(async (tx) => {
          await tx`UPDATE vector_ivf SET ready = true WHERE id = ${id}`;
          // The planner then knows the codes' count (a probe reads 8 ranges of the primary key).
          await tx`ANALYZE vector_codes`;
          const rows = await tx<
            { id: string }[]
          >`SELECT id FROM vector_ivf WHERE user_id = ${userId} AND model = ${model} AND id < ${id}`;
          return rows.map((r) => Number(r.id));
        }) as Promise<number[]>,
    );
    // The replaced trainings' codes go a batch at a time (each statement bounded), then the trainings.
    for (const old of older) {
      this.#cells.delete(old);
      for (;;) {
        const gone = await run(
          "vectorIndexDrop",
          (sql) => sql`
          DELETE FROM vector_codes WHERE (ivf, cell, session_id, seq) IN (SELECT ivf, cell, session_id, seq FROM vector_codes WHERE ivf = ${old} LIMIT 5000)`,
        );
        if (gone.count < 5000) break;
      }
      await run("vectorIndexDrop", (sql) => sql`DELETE FROM vector_ivf WHERE id = ${old}`);
    }
  }
}
