/**
 * A SQLite session's last activity (schema v9). An append leaves the session row alone: the
 * created_at of the messages appended since the row was last written carries the activity, and the
 * row is written when the hour changes (`active_hour` keys the owner and expiry indexes) or by a
 * write that sets or keeps the activity (touch, pop, truncation). Every read of the activity goes
 * through the SQL here.
 */

/** Sessions in one bucket of `active_hour` (schema v8): the activity indexes' key. */
const ACTIVE_HOUR_MS = 3_600_000;
/** The `active_hour` of a time, as the schema's triggers compute it. */
export const hourOf = (ms: number) => Math.trunc(Math.trunc(ms) / ACTIVE_HOUR_MS);

/**
 * A session's exact last activity (schema v9), for a `sessions` row named `s`: the row's own, or the
 * newer time of its newest message above activity_seq (appended since the row was last written).
 */
export const activitySql = (s: string) =>
  `coalesce((SELECT max(${s}.last_activity_at, am.created_at) FROM messages am
     WHERE am.session_id = ${s}.id AND am.seq > ${s}.activity_seq ORDER BY am.seq DESC LIMIT 1), ${s}.last_activity_at)`;
/** The exact last activity of an unaliased `sessions` row. */
export const ACTIVITY = activitySql("sessions");
/**
 * A `sessions` row named `s` active since a time (bound twice): the row's own activity is never newer
 * than the exact one, so a row that passes by itself needs no look at its messages.
 */
export const activeSinceSql = (s: string) => `(${s}.last_activity_at >= ? OR ${activitySql(s)} >= ?)`;
export const ACTIVE_SINCE = activeSinceSql("sessions");
/** The columns of a `SessionRow`, with the exact activity as `last_activity_at`. */
export const SESSION_COLUMNS = `id, user_id, created_at, ${ACTIVITY} AS last_activity_at, metadata`;

/**
 * One owner's sessions after a listing cursor: `user_id, active_hour of the cursor, last activity, id,
 * limit`. The index orders by the hour of the last activity, and the hour follows the time, so
 * ordering by it first changes nothing: SQLite walks the index and sorts within each hour.
 */
export const LIST_AFTER_SQL = `SELECT ${SESSION_COLUMNS} FROM sessions WHERE user_id = ? AND active_hour <= ? AND (${ACTIVITY}, id) < (?, ?)
  ORDER BY active_hour DESC, ${ACTIVITY} DESC, id DESC LIMIT ?`;

/** Sessions last active before a time, at most a number of them: `active_hour of it, time, time, limit`. */
export const INACTIVE_SESSIONS_SQL = `SELECT id FROM sessions WHERE active_hour <= ? AND last_activity_at < ? AND ${ACTIVITY} < ? LIMIT ?`;
