/**
 * The PostgreSQL store's history changes: idempotent writes and tail replacement in one round trip
 * (`threadkeep_write`), and branches. Schema version 4 adds them
 * (`migrations/004-history.ts`).
 */
import type postgres from "postgres";
import { SessionNotFoundError, ThreadkeepError } from "../../core/errors.js";
import type { Branch, BranchRecord, Message, MessageInput, OwnerScope, ReplaceOptions } from "../../core/types.js";
import {
  type BranchRow,
  branchFromRecord,
  branchNotFound,
  checkReplaceTarget,
  historyConflict,
  operationConflict,
  toBranch,
} from "../history.js";
import { bodyOf, ms, searchable, toMessage } from "./_rows.js";
import type { PgSql } from "./_client.js";
import { capWithWrite, hardCapWithWrite } from "./_cap.js";
import { releaseWithWrite } from "./_turn.js";
import { messageText } from "../_util.js";

type Tx = postgres.TransactionSql<Record<string, unknown>>;

const BRANCH_COLUMNS = "id, at_seq, parent_id, reason, created_at, metadata, messages";

/**
 * The owner condition of an owner-scoped write, for the write statement's `WHERE`: uncorrelated, so
 * PostgreSQL evaluates it once, before the write function runs, and another owner's session (or an
 * expired one) gets no row, with nothing written and no operation recorded. Without an owner: `true`.
 */
export const ownedBy = (sql: PgSql, id: string, owner: OwnerScope | undefined) =>
  owner
    ? sql`EXISTS (SELECT 1 FROM sessions WHERE id = ${id} AND user_id = ${owner.userId}
        AND last_activity_at >= ${owner.activeSince ?? Number.MIN_SAFE_INTEGER})`
    : sql`true`;

/**
 * The incarnation condition of a guarded write (`AppendOptions.sessionCreatedAt`), for the write
 * statement's `WHERE` beside {@link ownedBy}: the session row of that `createdAt`, locked `FOR KEY SHARE`
 * before the write function runs. The lock is what closes the race: a delete that committed after the
 * statement's snapshot leaves no row to lock (no row: nothing written), and one that comes later waits
 * for this write's commit, so the write function (which reads afresh) finds the same row, and no session
 * can be created again under the id meanwhile. KEY SHARE does not conflict with the function's own
 * update of the row, nor with plain appends'. Without `createdAt`: `true`.
 *
 * Only ever run inside {@link guardedWrite}, under the session's advisory lock: see there why.
 */
export const sameIncarnation = (sql: PgSql, id: string, createdAt: number | undefined) =>
  createdAt === undefined
    ? sql`true`
    : sql`EXISTS (SELECT 1 FROM sessions WHERE id = ${id} AND created_at = ${ms(createdAt)}::bigint FOR KEY SHARE)`;

/**
 * Runs `write` (one statement, built on the client it is given) as it is when unguarded; when guarded
 * (`createdAt` given), in a transaction that first takes the session's advisory lock, the key every
 * write function queues on, and only then runs it, whose {@link sameIncarnation} locks the row.
 *
 * The order is the point. Every write that takes both locks takes the advisory lock first and the
 * session row second: `threadkeep_write` and `switchBranch` (row `FOR UPDATE`), plain appends
 * (`threadkeep_append_scoped`, row `FOR NO KEY UPDATE` through its `UPDATE`). A guarded statement that
 * locked the row `FOR KEY SHARE` in its `WHERE` and only then queued on the advisory lock took them the
 * other way round: holding KEY SHARE it waited for a `threadkeep_write` that held the advisory lock and
 * waited for `FOR UPDATE`, and PostgreSQL aborted one of them (40P01). Taken here first, the advisory
 * lock is taken again by the write function in the same transaction (it is reentrant), and KEY SHARE is
 * only ever held by a write that already owns the advisory lock. Copies are rare and batched, so the
 * transaction's extra round trips (BEGIN, the lock, COMMIT) cost nothing that matters.
 */
export function guardedWrite<T>(
  sql: PgSql,
  id: string,
  createdAt: number | undefined,
  write: (sql: PgSql) => Promise<T>,
): Promise<T> {
  if (createdAt === undefined) return write(sql);
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtextextended(${id}, 0))`;
    // A transaction's client builds and runs statements as the pool's does; only the type differs.
    return write(tx as unknown as PgSql);
  }) as Promise<T>;
}

/** What {@link writeHistory} writes. */
export interface HistoryWrite {
  /** The session written to. */
  id: string;
  /** Replace what follows this seq; undefined for an idempotent append. */
  seq: number | undefined;
  /** The messages, validated. */
  messages: MessageInput[];
  /** The write's `operationDigest`; "" without an operation id. */
  digest: string;
  options: ReplaceOptions;
  /** The text search configuration that indexes the messages in the write; null leaves them to the background indexer. */
  lang: string | null;
  /** The token of the grant of `options.fence` when known (see `postgres/migrations/010-held-writes.ts`). */
  holder: string | null;
  /**
   * Gives the turn lease of `fence` back in the same statement (see `releaseWithWrite`); `done` hears
   * of it (with the number of waiting tickets) once the write applied.
   */
  release?: { fence: number; done: (waiting: number | null) => void };
}

/**
 * An idempotent append (`seq` undefined) or a tail replacement, in one round trip, owner-scoped too
 * (`options.owner`). A replayed operation reads its stored messages in a second one.
 */
export async function writeHistory(sql: PgSql, write: HistoryWrite): Promise<Message[]> {
  const { id, seq, messages: valid, digest, options, lang, holder, release } = write;
  const bodies = valid.map(bodyOf);
  const texts = valid.map((m) => searchable(messageText(m)));
  const branchMeta = options.branch?.metadata === undefined ? null : JSON.stringify(options.branch.metadata);
  const owner = options.owner;
  // A cap bounded by the summaries runs after the write function, which is then given none.
  const bounded = Boolean(options.keepUnsummarized && options.maxMessages);
  // An owner-scoped write checks the owner in the same statement (ownedBy).
  // A guarded write runs under the advisory lock first (guardedWrite), so the two locks come in one order.
  const [row] = await guardedWrite(
    sql,
    id,
    options.sessionCreatedAt,
    (q) => q<
      {
        out_status: string;
        out_first_seq: number;
        out_last_seq: number;
        out_created_at: number;
        waiting?: number | null;
      }[]
    >`
    WITH w AS (
      SELECT out_status, out_first_seq, out_last_seq, out_created_at FROM threadkeep_write_held(
        ${id}, ${seq ?? null}::bigint, ${bodies}::text[], ${texts}::text[], ${(!bounded && options.maxMessages) || null}::bigint,
        ${options.fence ?? null}::bigint, ${holder}::text, ${lang}::regconfig, ${options.operationId ?? null}::text, ${digest}::text,
        ${options.expectedLastSeq ?? null}::bigint, ${options.branch?.reason ?? null}::text, ${branchMeta}::text)
      WHERE ${ownedBy(q, id, owner)} AND ${sameIncarnation(q, id, options.sessionCreatedAt)}
    )
    SELECT out_status, out_first_seq, out_last_seq, out_created_at${bounded ? q`${capWithWrite(q, id, options.maxMessages!)}${hardCapWithWrite(q, id, options.hardCap)}` : q``}${release ? releaseWithWrite(q, id, release.fence) : q``} FROM w`,
  );
  if (!row) throw new SessionNotFoundError(id);
  switch (row.out_status) {
    case "not_found":
      throw new SessionNotFoundError(id);
    case "lease_expired":
      throw new ThreadkeepError("lease_expired", `The turn lease of session ${id} expired and was taken over`);
    case "operation_conflict":
      throw operationConflict(options.operationId!);
    case "history_conflict":
      // The function refused; the same check here words the reason as the other stores do.
      checkReplaceTarget(seq!, row.out_first_seq, row.out_last_seq, options.expectedLastSeq);
      throw historyConflict(`seq ${seq} cannot be replaced`);
  }
  release?.done(row.waiting ?? null);
  if (row.out_status === "replayed") {
    const rows = await sql<{ seq: number; created_at: number; body: string }[]>`
      SELECT seq, created_at, body FROM messages WHERE session_id = ${id} AND seq BETWEEN ${row.out_first_seq} AND ${row.out_last_seq}
      ORDER BY seq`;
    return rows.map(toMessage);
  }
  return bodies.map((body, i) => toMessage({ body, seq: row.out_first_seq + i, created_at: row.out_created_at }));
}

/** The session's branches by id. */
export async function listBranches(sql: PgSql | Tx, id: string): Promise<Branch[]> {
  const rows = await sql<
    BranchRow[]
  >`SELECT ${sql.unsafe(BRANCH_COLUMNS)} FROM branches WHERE session_id = ${id} ORDER BY id`;
  return rows.map(toBranch);
}

const upsert = (tx: PgSql | Tx, id: string, b: Branch) => tx`
  INSERT INTO branches (session_id, id, at_seq, parent_id, reason, created_at, metadata, messages)
  VALUES (${id}, ${b.id}, ${b.atSeq}, ${b.parentId}, ${b.reason}, ${b.createdAt},
          ${b.metadata === undefined ? null : JSON.stringify(b.metadata)}, ${JSON.stringify(b.messages)})
  ON CONFLICT (session_id, id) DO UPDATE SET at_seq = excluded.at_seq, parent_id = excluded.parent_id,
    reason = excluded.reason, created_at = excluded.created_at, metadata = excluded.metadata, messages = excluded.messages`;

/**
 * Swaps a main-line branch with the tail after its point, in one transaction; with `fence`, only while
 * that lease (of `holder`, when known) holds the session (`threadkeep_lease_refused`).
 */
export function switchBranch(
  sql: PgSql,
  lang: string,
  id: string,
  branchId: number,
  fence: number | undefined,
  holder: string | null,
): Promise<Branch> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtextextended(${id}, 0))`;
    const [session] = await tx<{ last_seq: number; first: number | null; refused: boolean }[]>`
      SELECT s.last_seq, (SELECT min(seq) FROM messages WHERE session_id = s.id) AS first,
             ${fence === undefined ? tx`false` : tx`threadkeep_lease_refused(s.id, ${fence}::bigint, ${holder}::text)`} AS refused
      FROM sessions s WHERE s.id = ${id} FOR UPDATE`;
    if (!session) throw new SessionNotFoundError(id);
    if (session.refused) {
      throw new ThreadkeepError("lease_expired", `The turn lease of session ${id} expired and was taken over`);
    }
    const branches = await listBranches(tx, id);
    const target = branches.find((b) => b.id === branchId);
    if (!target) throw branchNotFound(branchId);
    if (target.parentId !== null)
      throw historyConflict(`Branch ${branchId} splits from branch ${target.parentId}: switch to that one first`);
    checkReplaceTarget(target.atSeq, session.first ?? 1, session.last_seq);
    const tail = await tx<{ seq: number; created_at: number; body: string }[]>`
      DELETE FROM messages WHERE session_id = ${id} AND seq > ${target.atSeq} RETURNING seq, created_at, body`;
    const swapped: Branch = { ...target, messages: tail.sort((a, b) => a.seq - b.seq).map(toMessage) };
    const toMain = branches.filter((b) => b.parentId === branchId).map((b) => b.id);
    const toBranch = branches
      .filter((b) => b.parentId === null && b.id !== branchId && b.atSeq > target.atSeq)
      .map((b) => b.id);
    if (toMain.length) await tx`UPDATE branches SET parent_id = NULL WHERE session_id = ${id} AND id IN ${tx(toMain)}`;
    if (toBranch.length)
      await tx`UPDATE branches SET parent_id = ${branchId} WHERE session_id = ${id} AND id IN ${tx(toBranch)}`;
    const restored = target.messages;
    if (restored.length > 0) {
      await tx`
        INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
        SELECT ${id}, u.seq, u.created_at, u.body, u.txt, to_tsvector(${lang}::regconfig, left(u.txt, 100000))
        FROM unnest(${restored.map((m) => m.seq)}::bigint[], ${restored.map((m) => m.createdAt)}::bigint[],
                    ${restored.map(bodyOf)}::text[], ${restored.map((m) => searchable(messageText(m)))}::text[])
             AS u(seq, created_at, body, txt)`;
    }
    await upsert(tx, id, swapped);
    await tx`
      UPDATE sessions SET last_seq = coalesce((SELECT max(seq) FROM messages WHERE session_id = ${id}), 0),
        last_activity_at = threadkeep_now_ms() WHERE id = ${id}`;
    return swapped;
  }) as Promise<Branch>;
}

/** Stores a whole branch record; a missing session fails its foreign key. */
export async function saveBranch(sql: PgSql, id: string, record: BranchRecord): Promise<Branch> {
  return sql.begin(async (tx) => {
    const [{ next }] = await tx<
      { next: number }[]
    >`SELECT coalesce(max(id), 0) + 1 AS next FROM branches WHERE session_id = ${id}`;
    const branch = branchFromRecord(record, next);
    await upsert(tx, id, branch);
    return branch;
  }) as Promise<Branch>;
}
