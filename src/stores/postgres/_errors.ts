/** The mapping of PostgreSQL driver errors to threadkeep's coded errors. */
import { ThreadkeepError } from "../../core/errors.js";

/** Node and driver error codes that mean the server could not be reached or the connection broke. */
const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "CONNECT_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
]);

/** Codes of a connection that was never made: nothing was sent on it. */
const UNSENT_CODES = new Set([
  "ECONNREFUSED",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "CONNECT_TIMEOUT",
]);

/**
 * SQLSTATE classes of a server that is there but cannot serve now: connection exceptions (08),
 * transaction rollbacks (40: serialization failure, deadlock), insufficient resources (53: too many
 * connections, disk full), operator intervention (57: statement timeout, shutting down, starting up)
 * and system errors (58: I/O).
 */
const OUTAGE_CLASSES = new Set(["08", "40", "53", "57", "58"]);
/** Single states of the same kind: a lock wait that ran out; a read-only server (a standby, or a primary being failed over). */
const OUTAGE_STATES = new Set(["55P03", "25006"]);

/**
 * True for an SQLSTATE the server answered with that is not about availability (a missing table or
 * column 42P01/42703, a permission 42501, an invalid schema 3F000, …): retrying will not help, the
 * database needs fixing. Driver codes (no SQLSTATE) are not refusals.
 */
function isRefusal(code: string): boolean {
  return (
    /^[0-9A-Z]{5}$/.test(code) &&
    !CONNECTION_CODES.has(code) &&
    !OUTAGE_CLASSES.has(code.slice(0, 2)) &&
    !OUTAGE_STATES.has(code)
  );
}

/** True when `error` says the server could not be reached or the connection broke. */
export function isConnectionError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && CONNECTION_CODES.has(code);
}

/**
 * Turns a driver error into a coded {@link ThreadkeepError}, keeping it as `cause`. Constraint
 * violations get their own codes; everything else from underneath is `store_unavailable`, because a
 * store that failed is one to retry later, never an empty result. Errors thrown on purpose pass through.
 */
export function toStoreError(error: unknown, what: string): unknown {
  if (error instanceof ThreadkeepError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return error;
  if (code === "23505")
    return new ThreadkeepError("session_exists", `${what}: the session already exists`, { cause: error });
  if (code === "23503") return new ThreadkeepError("session_not_found", `${what}: no such session`, { cause: error });
  // Text with U+0000 or bytes the encoding cannot hold: the request, not the store, is at fault.
  if (code === "22021" || code === "22P05") {
    return new ThreadkeepError("invalid_request", `${what}: text PostgreSQL cannot store (e.g. a NUL character)`, {
      cause: error,
    });
  }
  const refused = isRefusal(code);
  const reason = CONNECTION_CODES.has(code)
    ? "the PostgreSQL server cannot be reached"
    : refused
      ? "PostgreSQL refused the statement"
      : "PostgreSQL failed";
  // The server's own words ("database \"x\" does not exist") say what to fix; the code alone does not.
  const said = (error as { message?: unknown }).message;
  const detail = typeof said === "string" && said ? `: ${said.slice(0, 200)}` : "";
  // A connection that broke with the statement on it leaves the statement's outcome unknown.
  const unknown = CONNECTION_CODES.has(code) && !UNSENT_CODES.has(code);
  // 53100 disk_full: the statement failed and rolled back; the same write succeeds once space returns.
  const details = unknown
    ? { outcome: "unknown" }
    : refused
      ? { refused: true, sqlState: code }
      : code === "53100"
        ? { storageFull: true, sqlState: code }
        : undefined;
  return new ThreadkeepError("store_unavailable", `${what}: ${reason} (${code})${detail}`, {
    cause: error,
    ...(details ? { details } : {}),
  });
}
