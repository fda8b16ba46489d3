import { createHash } from "node:crypto";
import { SessionNotFoundError, ThreadkeepError } from "../../core/errors.js";
import { validateMessages } from "../../core/messages.js";
import { withLease } from "../../core/open-turn.js";
import type {
  EmbeddingInput,
  VectorQuery,
  FullStore,
  VectorStore,
  UserMemoryVectorStore,
  AppendOptions,
  MessageInput,
  SearchQuery,
  ReplaceOptions,
  TurnOpening,
  OpenedTurn,
} from "../../core/types.js";
import { checkHistoryOptions, operationDigest } from "../history.js";
import { hardCapWithWrite } from "./_cap.js";
import * as history from "./_history.js";
import { PostgresLeases } from "./_lease.js";
import { PgOperations, type PgRun } from "./_operations.js";
import { messageReads } from "./_messages.js";
import { sessionMethods } from "./_sessions.js";
import { userMemoryMethods } from "./_user-memories.js";
import { stateMethods } from "./_state.js";
import { summaryMethods } from "./_summaries.js";
import { timeoutsOf } from "./_timeouts.js";
import { searchMessages } from "./_search.js";
import { appendLang, SearchIndexer } from "./_indexing.js";
import { StatisticsKeeper } from "./_statistics.js";
import { openedTurnOf } from "./_turn.js";
import { missingVectors, putVectors, searchVectors } from "./_vectors.js";
import { type PostgresVectorIndexOptions, VectorIndexer } from "./_ivf.js";
import { answersNewConnection, openClient, type PgClients, type PgSql } from "./_client.js";
import { toStoreError } from "./_errors.js";
import { bodyOf, searchable, toMessage } from "./_rows.js";
import { migrate, useTextSearchConfig } from "./_schema.js";
import { checkSearchQuery, messageText } from "../_util.js";

/** The backend name of the PostgreSQL store. */
export const POSTGRES_STORE_NAME = "postgres";

/** Options of {@link createPostgresStore}. */
export interface PostgresStoreOptions {
  /** Connection URL, e.g. `postgres://user:pass@127.0.0.1:5432/threadkeep`. */
  url: string;
  /** Most connections the pool opens (one more is opened for lease notifications). @default 10 */
  poolSize?: number;
  /**
   * Text search configuration of full-text search (`english` stems: "grocery" finds "groceries";
   * `simple` only lower-cases, treating every language alike; `dutch`, `german`, … ). Changing it
   * rebuilds the index once, on open. @default "english"
   */
  ftsLanguage?: string;
  /** The PostgreSQL schema that holds threadkeep's tables; created when missing. @default "public" */
  schema?: string;
  /**
   * How long to wait for a connection before failing with `store_unavailable`; once the server has been
   * unreachable this long, operations fail at once until it answers again. Also `?connect_timeout=`
   * (seconds) in the URL. @default 2
   */
  connectTimeoutSeconds?: number;
  /**
   * An operation with no answer within this long fails with `store_unavailable` (the server stops it
   * too); a write that timed out may still have happened. Also `?query_timeout=` (milliseconds) in the
   * URL. @default 5000
   */
  queryTimeoutMs?: number;
  /** Sessions deleted per statement by `expire()`, so a large cleanup never holds one giant lock. @default 500 */
  expireBatchSize?: number;
  /**
   * How long after a write its text is indexed for full-text search, in the background (ms); search
   * finds it meanwhile too, only dearer. @default 200
   */
  searchIndexDelayMs?: number;
  /**
   * While autovacuum is off for the store's tables, how often the store checks whether their
   * statistics went stale and analyzes those that did, as autovacuum would (`postgres/_statistics.ts`);
   * `false` leaves it to you (a scheduled `ANALYZE`). With autovacuum on it leaves the work to
   * autovacuum. @default 60000
   */
  statisticsIntervalMs?: number | false;
  /**
   * The IVF index of large owners' embeddings (`postgres/_ivf.ts`, built in the background once an
   * owner holds `minOwnerVectors` vectors); `false` scans every search exactly. Where the `vector`
   * extension (pgvector ≥ 0.5.0) is installed or can be created, its HNSW index is used instead
   * (`vectorIndex.pgvector: false` keeps the IVF); `describeVectorIndex()` and `/readyz` say which. @default {}
   */
  vectorIndex?: PostgresVectorIndexOptions | false;
}

/** What an append function answers (`threadkeep_append_scoped`). */
type AppendRow = { out_status: string; out_first_seq: number; out_created_at: number; out_waiting: number | null };

const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * A PostgreSQL store: the system of record when several threadkeep processes share sessions.
 * The schema is migrated on first use; the turn lease holds across processes (see `postgres/_lease.ts`).
 * Messages, sessions and state commit durably. The grant of an `openTurn` lease does not wait for its
 * WAL flush (the turn's durable write flushes it): a crash may lose it, and a fenced write then fails
 * with `lease_expired`, since writes check the holder with the fence (see `postgres/migrations/010-held-writes.ts`).
 * `acquireLease` grants durably.
 * @example
 * ```ts
 * import { createMemory } from "threadkeep";
 * import { createPostgresStore } from "threadkeep/stores/postgres"; // npm install postgres
 *
 * const memory = createMemory({ store: createPostgresStore({ url: "postgres://app@127.0.0.1/threadkeep" }) });
 * ```
 */
export function createPostgresStore(
  options: PostgresStoreOptions,
): FullStore & VectorStore & UserMemoryVectorStore & Required<Pick<VectorStore, "describeVectorIndex">> {
  const schema = options.schema ?? "public";
  if (!SCHEMA_NAME.test(schema)) {
    throw new ThreadkeepError(
      "invalid_request",
      `Invalid PostgreSQL schema name "${schema}": use letters, digits and _`,
    );
  }
  const lang = options.ftsLanguage ?? "english";
  const settings = timeoutsOf(options);
  const { queryTimeoutMs, connectTimeoutMs } = settings;
  const batchSize = Math.max(1, options.expireBatchSize ?? 500);
  // A short, valid channel name per schema, so stores of different schemas do not wake each other.
  const channel = `threadkeep_${createHash("sha256").update(schema).digest("hex").slice(0, 16)}`;
  let client: PgClients | null = null;
  let ready: Promise<PgClients> | null = null;
  let closing: Promise<void> | null = null;
  let closed = false;

  const open = async (): Promise<PgClients> => {
    client ??= await openClient(settings.url, {
      poolSize: options.poolSize ?? 10,
      connectTimeoutSeconds: connectTimeoutMs / 1000,
      schema,
      queryTimeoutMs,
    });
    await migrate(client.main, schema);
    await useTextSearchConfig(client.main, lang, schema);
    // pgvector's HNSW when the database has (or may create) the extension, else the IVF in SQL.
    await vectorIndex.detect(client.main);
    // Rows a stopped process left pending are indexed too.
    indexer.poke();
    // Statistics that follow the tables when autovacuum is off: every interval, the first one from
    // now (no statement at open, where a store's first moments are the busiest).
    statistics.start();
    return client;
  };

  /** The migrated client; a failed start is retried on the next call, so the store recovers by itself. */
  const connected = (): Promise<PgClients> => {
    if (closed) return Promise.reject(new ThreadkeepError("store_unavailable", "The PostgreSQL store is closed"));
    ready ??= open().catch((error) => {
      ready = null;
      throw error;
    });
    return ready;
  };

  const operations = new PgOperations({
    connected,
    reachable: () => answersNewConnection(settings.url, connectTimeoutMs),
    queryTimeoutMs,
    connectTimeoutMs,
  });
  const run: PgRun = (what, fn, how) => operations.run(what, fn, how);
  const pending = operations.pending;
  // Appends store their text unindexed; this indexes it in the background (see postgres/_indexing.ts).
  const indexer = new SearchIndexer(run, lang, options.searchIndexDelayMs);
  const statistics = new StatisticsKeeper(run, schema, options.statisticsIntervalMs);
  // Large owners' vectors are searched through cells trained in the background (see postgres/_ivf.ts).
  const vectorIndex = new VectorIndexer(run, options.vectorIndex);

  const leases = new PostgresLeases({
    sql: () => connected().then((c) => c.main),
    run,
    channel,
    fail: toStoreError,
    patienceMs: queryTimeoutMs,
  });

  /**
   * The token of the holder a fenced write comes from, when this instance granted its fence: the write
   * then applies only while that very grant holds the lease (see `postgres/migrations/010-held-writes.ts`).
   */
  const holderOf = (id: string, fence: number | undefined) =>
    fence === undefined ? null : (leases.holder(id, fence) ?? null);

  /** The fence a write gives back with itself (`releaseLease`), if any. */
  const releasing = (options: AppendOptions) =>
    options.releaseLease && options.fence !== undefined ? options.fence : undefined;

  /** An idempotent append (`seq` undefined) or a tail replacement, in one round trip. */
  const writeHistory = async (id: string, seq: number | undefined, inputs: MessageInput[], options: ReplaceOptions) => {
    const valid = validateMessages(inputs);
    checkHistoryOptions(options, seq);
    const digest = options.operationId === undefined ? "" : operationDigest(seq ?? null, valid);
    const fence = releasing(options);
    // After a write that released its lease, the holder's lease object and the waiters learn it.
    const release =
      fence === undefined
        ? undefined
        : { fence, done: (waiting: number | null) => leases.releasedByWrite(id, fence, waiting) };
    const holder = holderOf(id, options.fence);
    const indexLang = appendLang(valid.length, lang);
    const written = await run("writeHistory", (sql) =>
      history.writeHistory(sql, { id, seq, messages: valid, digest, options, lang: indexLang, holder, release }),
    );
    if (indexLang === null && valid.length > 0) indexer.poke();
    return written;
  };

  return {
    name: POSTGRES_STORE_NAME,
    capabilities: {
      persistent: true,
      fullTextSearch: true,
      crossProcessLease: true,
      nativeExpiry: false,
      vectors: true,
      ownerScope: true,
      combinedTurn: true,
      guardedAppends: true,
      idempotentWrites: true,
    },

    putEmbeddings: (id: string, model: string, items: EmbeddingInput[]) =>
      run("putEmbeddings", (sql) => putVectors(sql, id, model, items, vectorIndex)),
    missingEmbeddings: (id: string, model: string, limit = 1000) =>
      run("missingEmbeddings", (sql) => missingVectors(sql, id, model, limit)),
    searchVectors: (query: VectorQuery) => run("searchVectors", (sql) => searchVectors(sql, query, vectorIndex)),
    async describeVectorIndex() {
      await connected();
      return { ...vectorIndex.describe() };
    },

    ...sessionMethods(run),
    ...userMemoryMethods(run),

    async appendMessages(id: string, inputs: MessageInput[], append: AppendOptions = {}) {
      // The idempotent path is a function of its own, which checks the owner in the same statement.
      if (append.operationId !== undefined) return writeHistory(id, undefined, inputs, append);
      const valid = validateMessages(inputs);
      const bodies = valid.map(bodyOf);
      const texts = valid.map((m) => searchable(messageText(m)));
      const owner = append.owner;
      const fence = releasing(append);
      // A cap bounded by the summaries keeps what they do not reach (`threadkeep_append_scoped`).
      const keepSummarized = Boolean(append.keepUnsummarized && append.maxMessages);
      const holder = holderOf(id, append.fence);
      const indexLang = appendLang(bodies.length, lang);
      const userId = owner?.userId ?? null;
      const since = owner ? (owner.activeSince ?? Number.MIN_SAFE_INTEGER) : null;
      return run("appendMessages", async (sql) => {
        // The function checks the owner on the session row it updates (postgres/migrations/015-scoped-append.ts):
        // another owner's session, or an expired one, is `not_found`. One whole statement when
        // unguarded: a fragment is one more query object to build on every append.
        const call = (q: PgSql) => q<AppendRow[]>`
          SELECT out_status, out_first_seq, out_created_at, out_waiting${keepSummarized ? hardCapWithWrite(q, id, append.hardCap) : q``} FROM threadkeep_append_scoped(
            ${id}, ${bodies}::text[], ${texts}::text[], ${append.maxMessages || null}::bigint, ${keepSummarized},
            ${append.fence ?? null}::bigint, ${holder}::text, ${fence !== undefined}, ${indexLang}::regconfig,
            ${userId}::text, ${since}::bigint)`;
        const createdAt = append.sessionCreatedAt;
        const [row] =
          createdAt === undefined
            ? await call(sql)
            : // A guarded append takes the advisory lock before its row lock, as every write does (history.guardedWrite).
              await history.guardedWrite(
                sql,
                id,
                createdAt,
                (q) => q<AppendRow[]>`${call(q)} WHERE ${history.sameIncarnation(q, id, createdAt)}`,
              );
        if (!row || row.out_status === "not_found") throw new SessionNotFoundError(id);
        if (row.out_status === "lease_expired") {
          throw new ThreadkeepError("lease_expired", `The turn lease of session ${id} expired and was taken over`);
        }
        if (fence !== undefined) leases.releasedByWrite(id, fence, row.out_waiting);
        if (bodies.length > 0 && indexLang === null) indexer.poke();
        return bodies.map((body, i) => toMessage({ body, seq: row.out_first_seq + i, created_at: row.out_created_at }));
      });
    },

    replaceAfter: (id: string, seq: number, inputs: MessageInput[], replace: ReplaceOptions = {}) =>
      writeHistory(id, seq, inputs, replace),

    listBranches: (id) => run("listBranches", (sql) => history.listBranches(sql, id)),

    switchBranch: (id, branchId, switchOptions = {}) =>
      run("switchBranch", (sql) =>
        history.switchBranch(sql, lang, id, branchId, switchOptions.fence, holderOf(id, switchOptions.fence)),
      ),

    saveBranch: (id, record) => run("saveBranch", (sql) => history.saveBranch(sql, id, record)),

    ...messageReads(run),
    ...summaryMethods(run),
    ...stateMethods(run),

    async search(query: SearchQuery) {
      checkSearchQuery(query);
      return run("search", (sql) => searchMessages(sql, lang, query));
    },

    async expire(olderThan) {
      const removed: string[] = [];
      // One bounded statement per batch: locks are short, and a busy session (locked) is skipped.
      for (;;) {
        const rows = await run(
          "expire",
          (sql) => sql<{ id: string }[]>`
          WITH victims AS (
            SELECT id FROM sessions WHERE activity_floor < ${Math.ceil(olderThan)} AND last_activity_at < ${Math.ceil(olderThan)}
            ORDER BY activity_floor LIMIT ${batchSize} FOR UPDATE SKIP LOCKED
          ), gone AS (
            DELETE FROM sessions s USING victims v WHERE s.id = v.id RETURNING s.id
          ), unleased AS (
            DELETE FROM leases l USING gone g WHERE l.session_id = g.id AND l.expires_at <= threadkeep_now_ms()
          )
          SELECT id FROM gone`,
        );
        removed.push(...rows.map((r) => r.id));
        if (rows.length < batchSize) break;
      }
      await run("expire", async (sql) => {
        await sql`DELETE FROM lease_queue WHERE alive_until < threadkeep_now_ms() - 60000`;
        await sql`
          DELETE FROM leases WHERE session_id IN (
            SELECT l.session_id FROM leases l
            WHERE l.expires_at < ${Math.ceil(olderThan)} AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = l.session_id)
            LIMIT ${batchSize})`;
      });
      return removed;
    },

    async acquireLease(id, lease) {
      if (closed) throw new ThreadkeepError("store_unavailable", "The PostgreSQL store is closed");
      return leases.acquire(id, lease);
    },

    async openTurn(id: string, opening: TurnOpening): Promise<OpenedTurn> {
      if (closed) throw new ThreadkeepError("store_unavailable", "The PostgreSQL store is closed");
      const { userId, activeSince } = opening.owner;
      // The statement that grants the lease reads the turn too: one round trip when nobody waits.
      const { lease, read } = await leases.open(id, opening.lease, { userId, activeSince, last: opening.last });
      return withLease(lease, () => openedTurnOf(id, userId, read ?? null));
    },

    close() {
      closing ??= (async () => {
        // Held turns are given back first, while the pool still answers.
        await leases.close();
        await indexer.close();
        await statistics.close();
        await vectorIndex.close();
        closed = true;
        operations.close();
        // Bounded like every operation, so a connection that went silent cannot hold close() up.
        let timer: NodeJS.Timeout | undefined;
        const patience = new Promise((resolve) => {
          timer = setTimeout(resolve, queryTimeoutMs);
        });
        await Promise.race([Promise.allSettled([...pending].map((op) => op.work)), patience]);
        clearTimeout(timer);
        // Nothing of ours is pending any more. A zero timeout ends idle connections at once; waiting
        // would hang on a connection the driver still counts as starting after an outage.
        await client?.end({ timeout: 0 });
      })();
      return closing;
    },
  };
}
