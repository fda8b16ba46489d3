/**
 * A session's activity time off the append's indexes (schema version 12: `migrations/012-deferred-indexing.ts`).
 *
 * Every append moves `sessions.last_activity_at`. While that column was in two indexes (listing by
 * owner and activity, expiry by age), each append's session UPDATE was a non-HOT one: a new index
 * entry in each of the three indexes of `sessions` (280 WAL bytes, 15–140 µs of server CPU,
 * docs/decisions/0002-postgres-schema.md). Now `last_activity_at` stays exact and in no index, and the indexes hold
 * `activity_floor` instead: a lower bound of `last_activity_at` by less than {@link ACTIVITY_FLOOR_STEP_MS}.
 * A trigger keeps that true on every write of the row, whoever writes it (a process of an older
 * version too): it sets the floor to the activity time only when the time left the window
 * `[floor, floor + step)`, so an append to a session active in the last few minutes updates no
 * indexed column, and its UPDATE is HOT.
 *
 * Readers that check one row (owner and expiry checks, reads, the turn) read `last_activity_at`
 * as before. The two that walk an index use the floor to bound the walk and the exact time to decide:
 * listing ({@link listByActivity}) and expiry (`expire()` in `postgres/index.ts`).
 */
import type { SessionRow } from "./_rows.js";
import type { PgSql } from "./_client.js";

/**
 * How far `activity_floor` may lag `last_activity_at` (ms). Larger: fewer appends move an indexed
 * column; smaller: a listing sorts fewer extra rows (those active within this much of its last row).
 */
export const ACTIVITY_FLOOR_STEP_MS = 300_000;

/**
 * One page of an owner's sessions, most recent activity first (ties by id, descending), after the
 * cursor's `(lastActivityAt, id)` when given; `take` rows at most.
 *
 * Why the floor bounds it: let `f` be the `take`-th highest floor among the rows past the cursor.
 * Those `take` rows are active at or after `f` (the floor is a lower bound), so every row of the page
 * is too, and its floor is above `f - step`. The index on `(user_id, activity_floor)` finds `f` and
 * then the rows with a floor above `f - step`; only those are sorted by their exact time.
 */
export function listByActivity(
  sql: PgSql,
  userId: string,
  take: number,
  cursor: { lastActivityAt: number; id: string } | null,
) {
  const after = cursor
    ? sql`AND activity_floor <= ${cursor.lastActivityAt}::bigint AND (last_activity_at, id) < (${cursor.lastActivityAt}::bigint, ${cursor.id}::text)`
    : sql``;
  return sql<SessionRow[]>`
    SELECT id, user_id, created_at, last_activity_at, metadata FROM sessions
    WHERE user_id = ${userId} ${after}
      AND activity_floor > coalesce((
        SELECT activity_floor FROM sessions WHERE user_id = ${userId} ${after}
        ORDER BY activity_floor DESC, id DESC OFFSET ${Math.max(0, take - 1)} LIMIT 1
      ), ${Number.MIN_SAFE_INTEGER}::bigint + ${ACTIVITY_FLOOR_STEP_MS}) - ${ACTIVITY_FLOOR_STEP_MS}
    ORDER BY last_activity_at DESC, id DESC LIMIT ${take}`;
}
