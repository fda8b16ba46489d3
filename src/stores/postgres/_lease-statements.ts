/**
 * The statements of the PostgreSQL turn lease (see `postgres/_lease.ts` for how they fit together),
 * one function each: no state of the process here, only SQL.
 */
import type { PgSql } from "./_client.js";
import { type TurnReadArgs, turnDocColumn } from "./_turn.js";

/** A waiting ticket that was not refreshed for this long no longer holds its place. */
export const TICKET_TTL_MS = 5_000;

/** What one try of the first waiter answers (see {@link attemptLease}). */
export interface Attempt {
  fence: number | null;
  expires_at: number | null;
  ticket?: number | null;
  held_until: number | null;
  now: number;
  /** With a read: the turn's document (see `threadkeep_turn_doc`), null when nothing was granted. */
  turn?: string | null;
}

/**
 * One try for the first waiter, in one round trip. Without a ticket (it just arrived) it takes the
 * lease only if nobody waits, else it joins the line and gets a ticket; with one it takes the lease
 * if no live ticket is ahead of it, and otherwise keeps its ticket alive. With the waiter's `read`,
 * a grant also reads the turn's data, after the grant holds the row (see `postgres/_turn.ts`), and
 * commits without waiting for the WAL flush: the turn's write flushes it (see `postgres/migrations/010-held-writes.ts`).
 */
export function attemptLease(
  sql: PgSql,
  sessionId: string,
  ticket: number | null,
  waiter: { ttlMs: number; token: string; read?: TurnReadArgs },
) {
  const { ttlMs, token, read } = waiter;
  return sql<Attempt[]>`
    WITH cur AS (
      SELECT expires_at FROM leases WHERE session_id = ${sessionId}
    ), g AS (
      INSERT INTO leases AS l (session_id, fence, expires_at, holder)
      SELECT ${sessionId}, nextval('lease_fence'), threadkeep_now_ms() + ${ttlMs}, ${token}
      WHERE NOT EXISTS (
        SELECT 1 FROM lease_queue q
        WHERE q.session_id = ${sessionId} AND q.alive_until > threadkeep_now_ms()
          AND (${ticket}::bigint IS NULL OR q.ticket < ${ticket})
      )
      ON CONFLICT (session_id) DO UPDATE SET fence = excluded.fence, expires_at = excluded.expires_at, holder = excluded.holder
        WHERE l.expires_at <= threadkeep_now_ms()
      RETURNING l.fence, l.expires_at
    ), joined AS (
      INSERT INTO lease_queue (session_id, alive_until, holder)
      SELECT ${sessionId}, threadkeep_now_ms() + ${TICKET_TTL_MS}, ${token}
      WHERE ${ticket}::bigint IS NULL AND NOT EXISTS (SELECT 1 FROM g)
      RETURNING ticket
    ), served AS (
      DELETE FROM lease_queue WHERE ticket = ${ticket} AND EXISTS (SELECT 1 FROM g)
    ), beat AS (
      UPDATE lease_queue SET alive_until = threadkeep_now_ms() + ${TICKET_TTL_MS}
      WHERE ticket = ${ticket} AND NOT EXISTS (SELECT 1 FROM g)
    )
    SELECT a.*${read ? sql`, set_config('synchronous_commit', 'off', true) AS async_commit${turnDocColumn(sql, sessionId, read)}` : sql``} FROM (
      SELECT (SELECT fence FROM g) AS fence, (SELECT expires_at FROM g) AS expires_at,
             (SELECT ticket FROM joined) AS ticket, (SELECT expires_at FROM cur) AS held_until,
             threadkeep_now_ms() AS now
    ) a`;
}

/**
 * The first try of a waiter that has no ticket yet, when nobody waits and the lease is free: the
 * grant of {@link attemptLease} alone, without the statement's parts that serve a line (the current
 * holder's lapse, joining the line, a ticket served or kept alive). Those parts cost the server a
 * data-modifying statement each even when they touch no row (25–100 µs of server CPU a turn on a
 * 2-vCPU VM). No grant (`fence` null: the lease is held, or someone waits) sends the waiter on to
 * {@link attemptLease}, which tries again and joins the line; that costs a round trip only when the
 * session is contended. With `read`, as {@link attemptLease}: the turn's data, and an asynchronous commit;
 * without, a grant commits durably, and a try that granted nothing (it may have locked the row, which
 * writes WAL) does not wait for the flush.
 */
export function tryLease(sql: PgSql, sessionId: string, waiter: { ttlMs: number; token: string; read?: TurnReadArgs }) {
  const { ttlMs, token, read } = waiter;
  return sql<Attempt[]>`
    WITH g AS (
      INSERT INTO leases AS l (session_id, fence, expires_at, holder)
      SELECT ${sessionId}, nextval('lease_fence'), threadkeep_now_ms() + ${ttlMs}, ${token}
      WHERE NOT EXISTS (SELECT 1 FROM lease_queue q WHERE q.session_id = ${sessionId} AND q.alive_until > threadkeep_now_ms())
      ON CONFLICT (session_id) DO UPDATE SET fence = excluded.fence, expires_at = excluded.expires_at, holder = excluded.holder
        WHERE l.expires_at <= threadkeep_now_ms()
      RETURNING l.fence, l.expires_at
    )
    SELECT a.fence, a.expires_at, NULL::bigint AS held_until, threadkeep_now_ms() AS now${
      read
        ? sql`, set_config('synchronous_commit', 'off', true) AS async_commit${turnDocColumn(sql, sessionId, read)}`
        : sql`, CASE WHEN a.fence IS NULL THEN set_config('synchronous_commit', 'off', true) END AS async_commit`
    }
    FROM (SELECT 1) one LEFT JOIN g a ON true`;
}

/** Gives the grant of `fence` to `token` a fresh fence (see `PostgresLeases` #refence). */
export function refenceLease(sql: PgSql, sessionId: string, token: string, fence: number) {
  return sql<{ fence: number }[]>`
        UPDATE leases SET fence = nextval('lease_fence')
        WHERE session_id = ${sessionId} AND fence = ${fence} AND holder = ${token} RETURNING fence`;
}

/** A ticket for each waiter, named by its token, in one statement. */
export function insertTickets(sql: PgSql, sessionId: string, missing: { token: string }[]) {
  return sql<{ ticket: number }[]>`
      INSERT INTO lease_queue (session_id, alive_until, holder)
      SELECT ${sessionId}, threadkeep_now_ms() + ${TICKET_TTL_MS}, t.holder
      FROM unnest(${missing.map((w) => w.token)}::text[]) WITH ORDINALITY AS t(holder, n) ORDER BY t.n
      RETURNING ticket, set_config('synchronous_commit', 'off', true)`;
}

/** Wakes other processes' waiters of the session. */
export function notifyWaiters(sql: PgSql, channel: string, sessionId: string) {
  return sql`SELECT pg_notify(${channel}, ${sessionId}), set_config('synchronous_commit', 'off', true)`;
}

/** Extends the grant of `fence` to `token` while it is the session's newest and not released. */
export function renewLease(sql: PgSql, sessionId: string, fence: number, token: string, ttlMs: number) {
  return sql<{ expires_at: number; now: number }[]>`
        UPDATE leases SET expires_at = threadkeep_now_ms() + ${Math.max(1, Math.floor(ttlMs))}
        WHERE session_id = ${sessionId} AND fence = ${fence} AND holder = ${token} AND expires_at > 0
        RETURNING expires_at, threadkeep_now_ms() AS now`;
}

/** Gives the grant of `fence` to `token` back and wakes the session's waiters. */
export function releaseLease(sql: PgSql, channel: string, sessionId: string, fence: number, token: string) {
  return sql`
        WITH r AS (
          UPDATE leases SET expires_at = 0
          WHERE session_id = ${sessionId} AND fence = ${fence} AND holder = ${token} RETURNING session_id
        )
        SELECT pg_notify(${channel}, session_id), set_config('synchronous_commit', 'off', true) FROM r`;
}

/** Gives back a lease granted to any of `tokens` and deletes their tickets; wakes waiters if either was there. */
export function giveBackLeases(sql: PgSql, channel: string, sessionId: string, tokens: string[]) {
  return sql`
            WITH r AS (
              UPDATE leases SET expires_at = 0
              WHERE session_id = ${sessionId} AND holder = ANY(${tokens}::text[]) AND expires_at > 0 RETURNING session_id
            ), d AS (
              DELETE FROM lease_queue WHERE session_id = ${sessionId} AND holder = ANY(${tokens}::text[]) RETURNING session_id
            )
            SELECT pg_notify(${channel}, ${sessionId}) WHERE EXISTS (SELECT 1 FROM r) OR EXISTS (SELECT 1 FROM d)`;
}

/** Deletes `tickets` and tells the other processes the line moved. */
export function dropTickets(sql: PgSql, channel: string, sessionId: string, tickets: number[]) {
  return sql`
          WITH d AS (DELETE FROM lease_queue WHERE ticket = ANY(${tickets}::bigint[]))
          SELECT pg_notify(${channel}, ${sessionId}), set_config('synchronous_commit', 'off', true)`;
}

/** Keeps `tickets` alive for another {@link TICKET_TTL_MS}. */
export function beatTickets(sql: PgSql, tickets: number[]) {
  return sql`
            UPDATE lease_queue SET alive_until = threadkeep_now_ms() + ${TICKET_TTL_MS}
            WHERE ticket = ANY(${tickets}::bigint[]) RETURNING set_config('synchronous_commit', 'off', true)`;
}
