/**
 * Every error threadkeep throws on purpose is a {@link ThreadkeepError} with a stable `code`.
 * The HTTP status of each code lives in one table, {@link ERROR_STATUS}, so the library, the server
 * and the CLI agree on what a failure means.
 */

/** Stable error codes. Scripts and clients may depend on these strings. */
export type ErrorCode =
  | "invalid_session_id"
  | "session_not_found"
  | "not_found"
  | "unsupported_media_type"
  | "session_exists"
  | "invalid_message"
  | "invalid_request"
  | "invalid_store_url"
  | "state_conflict"
  | "history_conflict"
  | "operation_conflict"
  | "lease_expired"
  | "session_busy"
  | "not_supported"
  | "capability_missing"
  | "store_unavailable"
  | "store_corrupt"
  | "store_misconfigured"
  | "schema_version_unsupported"
  | "missing_dependency"
  | "invalid_api_key"
  | "invalid_user"
  | "invalid_user_token"
  | "operator_only"
  | "payload_too_large"
  | "rate_limited"
  | "too_many_concurrent_turns"
  | "upstream_error"
  | "upstream_timeout"
  | "upstream_not_configured"
  | "embedding_dimension_mismatch"
  | "internal_error";

/** HTTP status for each error code (fastify's `createError` table, in one place). */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = {
  invalid_session_id: 400,
  session_not_found: 404,
  not_found: 404,
  unsupported_media_type: 415,
  session_exists: 409,
  invalid_message: 400,
  invalid_request: 400,
  invalid_store_url: 400,
  state_conflict: 409,
  history_conflict: 409,
  operation_conflict: 409,
  lease_expired: 409,
  session_busy: 429,
  not_supported: 501,
  capability_missing: 501,
  store_unavailable: 503,
  store_corrupt: 500,
  store_misconfigured: 503,
  schema_version_unsupported: 500,
  missing_dependency: 500,
  invalid_api_key: 401,
  invalid_user: 400,
  invalid_user_token: 401,
  operator_only: 403,
  payload_too_large: 413,
  rate_limited: 429,
  too_many_concurrent_turns: 429,
  upstream_error: 502,
  upstream_timeout: 504,
  upstream_not_configured: 503,
  embedding_dimension_mismatch: 409,
  internal_error: 500,
};

/** Options accepted by {@link ThreadkeepError}. */
export interface ThreadkeepErrorOptions {
  /** The underlying error, kept for logs and debugging. */
  cause?: unknown;
  /** Structured detail safe to show a client (e.g. the offending field). */
  details?: Record<string, unknown>;
}

/** Base class of every coded error threadkeep throws. */
export class ThreadkeepError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: ThreadkeepErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = ERROR_STATUS[code];
    if (options.details) this.details = options.details;
  }
}

/** True when `error` is a {@link ThreadkeepError}, optionally with the given code. */
export function isThreadkeepError(error: unknown, code?: ErrorCode): error is ThreadkeepError {
  return error instanceof ThreadkeepError && (code === undefined || error.code === code);
}

/**
 * True when a store write failed without anyone knowing whether it happened: the request may have
 * reached the store before its answer was lost (a timeout, a connection that broke). A retry with the
 * same `operationId` stores it at most once.
 */
export function isOutcomeUnknown(error: unknown): boolean {
  return isThreadkeepError(error, "store_unavailable") && error.details?.outcome === "unknown";
}

/**
 * True when a store error is not an outage: the store answered and refused the statement for a
 * reason that retrying will not fix (PostgreSQL: a missing table or column, a permission). An outage
 * (cannot connect, timed out, connection lost, server shutting down or overloaded) is not a refusal.
 */
export function isStoreRefusal(error: unknown): error is ThreadkeepError {
  return isThreadkeepError(error, "store_unavailable") && error.details?.refused === true;
}

/**
 * True when a store write failed for want of space: a full disk or a file-size limit or quota
 * (SQLite, file store), a Redis server at its `maxmemory` with `noeviction`, PostgreSQL's
 * `53100 disk_full`. Nothing was written; the same write succeeds once space returns, so it is
 * reported (`/readyz`, metrics) rather than retried.
 */
export function isStorageFull(error: unknown): error is ThreadkeepError {
  return isThreadkeepError(error, "store_unavailable") && error.details?.storageFull === true;
}

/** The store could not be reached or failed underneath; retrying later may succeed. */
export class StoreUnavailableError extends ThreadkeepError {
  constructor(message: string, options: ThreadkeepErrorOptions = {}) {
    super("store_unavailable", message, options);
  }
}

/** A session id that is not a canonical UUID nor `user_{uuid}_conv_{uuid}`. */
export class InvalidSessionIdError extends ThreadkeepError {
  constructor(message: string, options: ThreadkeepErrorOptions = {}) {
    super("invalid_session_id", message, options);
  }
}

/** The session does not exist, or belongs to another owner (the two are indistinguishable on purpose). */
export class SessionNotFoundError extends ThreadkeepError {
  constructor(sessionId: string, options: ThreadkeepErrorOptions = {}) {
    super("session_not_found", `No session with id ${sessionId}`, options);
  }
}

/** A compare-and-set of session state lost against a newer version. */
export class StateConflictError extends ThreadkeepError {
  constructor(expected: number, actual: number) {
    super("state_conflict", `Session state is at version ${actual}, not ${expected}`, {
      details: { expectedVersion: expected, actualVersion: actual },
    });
  }
}
