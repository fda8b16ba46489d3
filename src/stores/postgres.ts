import { createHash } from "node:crypto";
import type postgres from "postgres";
import { SessionNotFoundError, StateConflictError, ThreadkeepError } from "../core/errors.js";
import { validateMessages } from "../core/messages.js";
import { withLease } from "../core/open-turn.js";
import type {
  EmbeddingInput,
  VectorQuery,
  VectorStore,
  AppendOptions,
  ListOptions,
  Message,
  MessageInput,
  MessageQuery,
  SearchQuery,
  SessionInput,
  SessionState,
  SummaryInput,
  ReplaceOptions,
  TurnOpening,
  OpenedTurn,
} from "../core/types.js";
import { checkHistoryOptions, operationDigest } from "./_history.js";
import * as history from "./_postgres-history.js";
import { PostgresLeases } from "./_postgres-lease.js";
import { PgOperations } from "./_postgres-operations.js";
import { timeoutsOf } from "./_postgres-timeouts.js";
import { searchMessages } from "./_postgres-search.js";
import { capWithWrite } from "./_postgres-cap.js";
import { openedTurnOf, releaseWithWrite } from "./_postgres-turn.js";
import { missingVectors, putVectors, searchVectors } from "./_postgres-vectors.js";
import { openClient } from "./_postgres-client.js";
import { toStoreError } from "./_postgres-errors.js";
import {
  bodyOf,
  type MessageRow,
  type SessionRow,
  type SummaryRow,
  searchable,
  toMessage,
  toSession,
  toSummary,
} from "./_postgres-rows.js";
import { migrate, type PgSql, useTextSearchConfig } from "./_postgres-schema.js";
import {
  checkOwner,
  checkSearchQuery,
  DEFAULT_LIST_LIMIT,
  decodeCursor,
  encodeCursor,
  messageText,
  seqBounds,
} from "./_util.js";

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
}

const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** A time for a `bigint` column: whole milliseconds, or null for "now". */
const ms = (at: number | undefined) => (at === undefined ? null : Math.round(at));

/**
 * A PostgreSQL store: the system of record when several threadkeep processes share sessions.
 * The schema is migrated on first use; the turn lease holds across processes (see `_postgres-lease.ts`).
 * Messages, sessions and state commit durably. The grant of an `openTurn` lease does not wait for its
 * WAL flush (the turn's durable write flushes it): a crash may lose it, and a fenced write then fails
 * with `lease_expired`, since writes check the holder with the fence (see `_postgres-fence.ts`).
 * `acquireLease` grants durably.
 */
export function createPostgresStore(options: PostgresStoreOptions): VectorStore {
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
  let client: PgSql | null = null;
  let ready: Promise<PgSql> | null = null;
  let closing: Promise<void> | null = null;
  let closed = false;

  const open = async (): Promise<PgSql> => {
    client ??= await openClient(settings.url, {
      poolSize: options.poolSize ?? 10,
      connectTimeoutSeconds: connectTimeoutMs / 1000,
      schema,
      queryTimeoutMs,
    });
    await migrate(client, schema);
    await useTextSearchConfig(client, lang, schema);
    return client;
  };

  /** The migrated client; a failed start is retried on the next call, so the store recovers by itself. */
  const connected = (): Promise<PgSql> => {
    if (closed)
      return Promise.reject(new ThreadkeepError("store_unavailable", "The PostgreSQL store is closed"));
    ready ??= open().catch((error) => {
      ready = null;
      throw error;
    });
    return ready;
  };

  const operations = new PgOperations({ connected, queryTimeoutMs, connectTimeoutMs });
  const run = <T>(what: string, fn: (sql: PgSql) => Promise<T>): Promise<T> => operations.run(what, fn);
  const pending = operations.pending;

  const leases = new PostgresLeases({
    sql: connected,
    run,
    channel,
    fail: toStoreError,
    patienceMs: queryTimeoutMs,
  });

  /** Locks the session row for a change of its messages; the seq lock appends also take. */
  const lockSession = async (tx: postgres.TransactionSql<Record<string, unknown>>, id: string) => {
    const [row] = await tx`SELECT id FROM sessions WHERE id = ${id} FOR UPDATE`;
    if (!row) throw new SessionNotFoundError(id);
  };
  const resetLastSeq = (tx: postgres.TransactionSql<Record<string, unknown>>, id: string) =>
    tx`UPDATE sessions SET last_seq = coalesce((SELECT max(seq) FROM messages WHERE session_id = ${id}), 0) WHERE id = ${id}`;

  const stateOf = async (sql: PgSql, id: string): Promise<SessionState | null> => {
    const [row] = await sql<{ version: number | null; data: string | null }[]>`
      SELECT st.version, st.data FROM sessions s LEFT JOIN session_state st ON st.session_id = s.id WHERE s.id = ${id}`;
    if (!row) return null;
    return row.version === null
      ? { version: 0, data: {} }
      : { version: row.version, data: JSON.parse(row.data!) };
  };

  /**
   * An owner-scoped read in one statement: the messages of the session id a subquery on `sessions`
   * returns for this owner and activity, so the owner and expiry are checked on the same snapshot as
   * the read, and rows carry only their own columns. An empty answer reads the session apart, to tell
   * "no messages" from `session_not_found`.
   */
  const ownedMessages = async (sql: PgSql, id: string, query: MessageQuery): Promise<Message[]> => {
    const [lo, hi] = seqBounds(query);
    const newest = query.last !== undefined;
    const count = newest ? Math.max(0, Math.floor(query.last!)) : query.limit === undefined ? null : Math.max(0, Math.floor(query.limit));
    const { userId, activeSince } = query.owner!;
    const rows = await sql<MessageRow[]>`
      SELECT seq, created_at, body FROM messages
      WHERE session_id = (SELECT id FROM sessions WHERE id = ${id} AND user_id = ${userId}
          AND last_activity_at >= ${activeSince ?? Number.MIN_SAFE_INTEGER})
        AND seq BETWEEN ${lo} AND ${hi}
      ORDER BY ${newest ? sql`seq DESC` : sql`seq`} LIMIT ${count}`;
    if (rows.length === 0) {
      const [session] = await sql<{ userId: string; lastActivityAt: number }[]>`
        SELECT user_id AS "userId", last_activity_at AS "lastActivityAt" FROM sessions WHERE id = ${id}`;
      checkOwner(id, query.owner, session);
      return [];
    }
    if (newest) rows.reverse();
    const messages = new Array<Message>(rows.length);
    for (let i = 0; i < rows.length; i++) messages[i] = toMessage(rows[i]);
    return messages;
  };

  /**
   * The token of the holder a fenced write comes from, when this instance granted its fence: the write
   * then applies only while that very grant holds the lease (see `_postgres-fence.ts`).
   */
  const holderOf = (id: string, fence: number | undefined) => (fence === undefined ? null : (leases.holder(id, fence) ?? null));

  /** The fence a write gives back with itself (`releaseLease`), if any. */
  const releasing = (options: AppendOptions) => (options.releaseLease && options.fence !== undefined ? options.fence : undefined);

  /** An idempotent append (`seq` undefined) or a tail replacement, in one round trip. */
  const writeHistory = async (id: string, seq: number | undefined, inputs: MessageInput[], options: ReplaceOptions) => {
    const valid = validateMessages(inputs);
    checkHistoryOptions(options, seq);
    const digest = options.operationId === undefined ? "" : operationDigest(seq ?? null, valid);
    const fence = releasing(options);
    // After a write that released its lease, the holder's lease object and the waiters learn it.
    const release = fence === undefined ? undefined : { fence, done: (waiting: number | null) => leases.releasedByWrite(id, fence, waiting) };
    const holder = holderOf(id, options.fence);
    return run("writeHistory", (sql) => history.writeHistory(sql, lang, id, seq, valid, digest, options, holder, release));
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
      keepUnsummarized: true,
      guardedSummaries: true,
    },

    putEmbeddings: (id: string, model: string, items: EmbeddingInput[]) =>
      run("putEmbeddings", (sql) => putVectors(sql, id, model, items)),
    missingEmbeddings: (id: string, model: string, limit = 1000) =>
      run("missingEmbeddings", (sql) => missingVectors(sql, id, model, limit)),
    searchVectors: (query: VectorQuery) => run("searchVectors", (sql) => searchVectors(sql, query)),

    createSession: (input: SessionInput) =>
      run("createSession", async (sql) => {
        const [row] = await sql<SessionRow[]>`
          WITH t AS (SELECT coalesce(${ms(input.createdAt)}::bigint, threadkeep_now_ms()) AS created)
          INSERT INTO sessions (id, user_id, created_at, last_activity_at, metadata)
          SELECT ${input.id}, ${input.userId}, t.created, coalesce(${ms(input.lastActivityAt)}::bigint, t.created),
                 ${JSON.stringify(input.metadata ?? {})}
          FROM t
          RETURNING id, user_id, created_at, last_activity_at, metadata`;
        return toSession(row);
      }),

    getSession: (id) =>
      run("getSession", async (sql) => {
        const [row] = await sql<SessionRow[]>`
          SELECT id, user_id, created_at, last_activity_at, metadata FROM sessions WHERE id = ${id}`;
        return row ? toSession(row) : null;
      }),

    listSessions: (userId: string, list: ListOptions = {}) =>
      run("listSessions", async (sql) => {
        const limit = list.limit ?? DEFAULT_LIST_LIMIT;
        const cursor = list.cursor ? decodeCursor(list.cursor) : null;
        const rows = await sql<SessionRow[]>`
          SELECT id, user_id, created_at, last_activity_at, metadata FROM sessions
          WHERE user_id = ${userId}
          ${cursor ? sql`AND (last_activity_at, id) < (${cursor.lastActivityAt}::bigint, ${cursor.id}::text)` : sql``}
          ORDER BY last_activity_at DESC, id DESC LIMIT ${Math.max(0, limit) + 1}`;
        const sessions = rows.slice(0, limit).map(toSession);
        const last = sessions.at(-1);
        return { sessions, nextCursor: rows.length > limit && last ? encodeCursor(last) : null };
      }),

    listAllSessions: (list: ListOptions = {}) =>
      run("listAllSessions", async (sql) => {
        const limit = list.limit ?? DEFAULT_LIST_LIMIT;
        // Ids compare in byte order (COLLATE "C"), the order the other stores give.
        const rows = await sql<SessionRow[]>`
          SELECT id, user_id, created_at, last_activity_at, metadata FROM sessions
          WHERE id > ${list.cursor ?? ""} ORDER BY id LIMIT ${Math.max(0, limit) + 1}`;
        const sessions = rows.slice(0, limit).map(toSession);
        const last = sessions.at(-1);
        return { sessions, nextCursor: rows.length > limit && last ? last.id : null };
      }),

    deleteSession: (id) =>
      run("deleteSession", async (sql) => (await sql`DELETE FROM sessions WHERE id = ${id}`).count > 0),

    touchSession: (id, at) =>
      run("touchSession", async (sql) => {
        const result = await sql`
          UPDATE sessions SET last_activity_at = coalesce(${ms(at)}::bigint, threadkeep_now_ms()) WHERE id = ${id}`;
        if (result.count === 0) throw new SessionNotFoundError(id);
      }),

    updateSessionMetadata: (id, metadata) =>
      run("updateSessionMetadata", async (sql) => {
        const [row] = await sql<SessionRow[]>`
          UPDATE sessions SET metadata = ${JSON.stringify(metadata)} WHERE id = ${id}
          RETURNING id, user_id, created_at, last_activity_at, metadata`;
        if (!row) throw new SessionNotFoundError(id);
        return toSession(row);
      }),

    async appendMessages(id: string, inputs: MessageInput[], append: AppendOptions = {}) {
      // The idempotent path is a function of its own, which checks the owner in the same statement.
      if (append.operationId !== undefined) return writeHistory(id, undefined, inputs, append);
      const valid = validateMessages(inputs);
      const bodies = valid.map(bodyOf);
      const texts = valid.map((m) => searchable(messageText(m)));
      const owner = append.owner;
      const fence = releasing(append);
      // A cap bounded by the summaries runs after the append function, which is then given none.
      const bounded = Boolean(append.keepUnsummarized && append.maxMessages);
      const holder = holderOf(id, append.fence);
      return run("appendMessages", async (sql) => {
        // The owner check is an uncorrelated condition: PostgreSQL evaluates it once, before the
        // function runs, so another owner's session gets no row and nothing is written.
        const [row] = await sql<{ out_status: string; out_first_seq: number; out_created_at: number; waiting?: number | null }[]>`
          WITH w AS (
            SELECT out_status, out_first_seq, out_created_at FROM threadkeep_append_held(
              ${id}, ${bodies}::text[], ${texts}::text[], ${(!bounded && append.maxMessages) || null}::bigint,
              ${append.fence ?? null}::bigint, ${holder}::text, ${lang}::regconfig)
            WHERE ${owner ? sql`EXISTS (SELECT 1 FROM sessions WHERE id = ${id} AND user_id = ${owner.userId}
              AND last_activity_at >= ${owner.activeSince ?? Number.MIN_SAFE_INTEGER})` : sql`true`}
          )
          SELECT out_status, out_first_seq, out_created_at${bounded ? capWithWrite(sql, id, append.maxMessages!) : sql``}${fence === undefined ? sql`` : releaseWithWrite(sql, id, fence)} FROM w`;
        if (!row || row.out_status === "not_found") throw new SessionNotFoundError(id);
        if (row.out_status === "lease_expired") {
          throw new ThreadkeepError(
            "lease_expired",
            `The turn lease of session ${id} expired and was taken over`,
          );
        }
        if (fence !== undefined) leases.releasedByWrite(id, fence, row.waiting ?? null);
        return bodies.map((body, i) =>
          toMessage({ body, seq: row.out_first_seq + i, created_at: row.out_created_at }),
        );
      });
    },

    replaceAfter: (id: string, seq: number, inputs: MessageInput[], replace: ReplaceOptions = {}) =>
      writeHistory(id, seq, inputs, replace),

    listBranches: (id) => run("listBranches", (sql) => history.listBranches(sql, id)),

    switchBranch: (id, branchId, switchOptions = {}) =>
      run("switchBranch", (sql) => history.switchBranch(sql, lang, id, branchId, switchOptions.fence, holderOf(id, switchOptions.fence))),

    saveBranch: (id, record) => run("saveBranch", (sql) => history.saveBranch(sql, id, record)),

    getMessages: (id: string, query: MessageQuery = {}) =>
      run("getMessages", async (sql) => {
        if (query.owner) return ownedMessages(sql, id, query);
        if (query.last !== undefined && query.last <= 0) return [];
        // Every filter folds into one seq range, so each read is a single index range scan.
        const [lo, hi] = seqBounds(query);
        if (query.last !== undefined) {
          // Keep the range even when it is unbounded: with it PostgreSQL's generic plan is cheap, so the
          // prepared statement is planned once; `LIMIT $n` alone makes it re-plan on every call.
          const rows = await sql<MessageRow[]>`
            SELECT seq, created_at, body FROM messages WHERE session_id = ${id} AND seq BETWEEN ${lo} AND ${hi}
            ORDER BY seq DESC LIMIT ${Math.floor(query.last)}`;
          return rows.reverse().map(toMessage);
        }
        const rows = await sql<MessageRow[]>`
          SELECT seq, created_at, body FROM messages WHERE session_id = ${id} AND seq BETWEEN ${lo} AND ${hi}
          ORDER BY seq LIMIT ${query.limit === undefined ? null : Math.max(0, Math.floor(query.limit))}`;
        return rows.map(toMessage);
      }),

    countMessages: (id) =>
      run("countMessages", async (sql) => {
        const [row] = await sql<
          { n: number }[]
        >`SELECT count(*)::integer AS n FROM messages WHERE session_id = ${id}`;
        return row.n;
      }),

    popMessage: (id) =>
      run("popMessage", (sql) =>
        sql.begin(async (tx) => {
          await lockSession(tx, id);
          const [row] = await tx<MessageRow[]>`
            DELETE FROM messages WHERE session_id = ${id}
              AND seq = (SELECT max(seq) FROM messages WHERE session_id = ${id})
            RETURNING seq, created_at, body`;
          if (!row) return null;
          await resetLastSeq(tx, id);
          return toMessage(row);
        }),
      ),

    truncateAfter: (id, seq) =>
      run("truncateAfter", (sql) =>
        sql.begin(async (tx) => {
          await lockSession(tx, id);
          const result =
            await tx`DELETE FROM messages WHERE session_id = ${id} AND seq > ${seqBounds({ toSeq: seq })[1]}`;
          if (result.count > 0) await resetLastSeq(tx, id);
          return result.count;
        }),
      ),

    saveSummary: (id: string, input: SummaryInput) =>
      run("saveSummary", async (sql) => {
        // Only into the session row it names (and of the incarnation it was made from, when given):
        // the row lock re-reads the latest version, so a session deleted meanwhile gives no row.
        const [row] = await sql<SummaryRow[]>`
          INSERT INTO summaries (session_id, from_seq, to_seq, created_at, content, metadata)
          SELECT s.id, ${input.fromSeq}, ${input.toSeq}, coalesce(${ms(input.createdAt)}::bigint, threadkeep_now_ms()),
                 ${input.content}, ${input.metadata === undefined ? null : JSON.stringify(input.metadata)}
          FROM sessions s
          WHERE s.id = ${id} AND (${ms(input.sessionCreatedAt)}::bigint IS NULL OR s.created_at = ${ms(input.sessionCreatedAt)}::bigint)
          FOR KEY SHARE
          RETURNING id, from_seq, to_seq, created_at, content, metadata`;
        if (!row) throw new SessionNotFoundError(id);
        return toSummary(row);
      }),

    listSummaries: (id) =>
      run("listSummaries", async (sql) => {
        const rows = await sql<SummaryRow[]>`
          SELECT id, from_seq, to_seq, created_at, content, metadata FROM summaries
          WHERE session_id = ${id} ORDER BY from_seq, id`;
        return rows.map(toSummary);
      }),

    getState: (id) =>
      run("getState", async (sql) => {
        const state = await stateOf(sql, id);
        if (!state) throw new SessionNotFoundError(id);
        return state;
      }),

    setState: (id, data, expectedVersion) =>
      run("setState", async (sql) => {
        const json = JSON.stringify(data);
        // Version 0 means "no row yet": the insert that wins the primary key is the one CAS that succeeds.
        const rows =
          expectedVersion === 0
            ? await sql<{ version: number }[]>`
                INSERT INTO session_state (session_id, version, data) VALUES (${id}, 1, ${json})
                ON CONFLICT (session_id) DO NOTHING RETURNING version`
            : await sql<{ version: number }[]>`
                UPDATE session_state SET version = version + 1, data = ${json}
                WHERE session_id = ${id} AND version = ${expectedVersion} RETURNING version`;
        if (rows.length > 0) return { version: rows[0].version, data: JSON.parse(json) };
        const actual = await stateOf(sql, id);
        if (!actual) throw new SessionNotFoundError(id);
        throw new StateConflictError(expectedVersion, actual.version);
      }),

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
            SELECT id FROM sessions WHERE last_activity_at < ${Math.ceil(olderThan)}
            ORDER BY last_activity_at LIMIT ${batchSize} FOR UPDATE SKIP LOCKED
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
      return withLease(lease, () => openedTurnOf(id, userId, read!));
    },

    close() {
      closing ??= (async () => {
        // Held turns are given back first, while the pool still answers.
        await leases.close();
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
