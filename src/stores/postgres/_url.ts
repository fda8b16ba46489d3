/**
 * Checking a PostgreSQL store URL when the store is created, so that a typo fails at once with
 * `invalid_store_url` instead of on first use (the driver would send an unknown parameter to the
 * server as a setting, and connect to a database named after the user when the path is missing).
 */
import { ThreadkeepError } from "../../core/errors.js";

/** threadkeep's own parameters (read and taken out in `postgres/_timeouts.ts`). */
const OWN_PARAMS = ["connect_timeout", "query_timeout"];
/**
 * The parameters the driver reads from a URL: libpq's, and the driver's own connection settings
 * (`prepare=false` is what a transaction-mode PgBouncer needs).
 */
const DRIVER_PARAMS = ["sslmode", "ssl", "sslrootcert", "sslnegotiation", "target_session_attrs", "application_name"];
/**
 * Server settings the driver sends at connect for the connection's session (the server checks their
 * values then): the common per-connection ones; any other name is more likely a typo.
 */
const SERVER_SETTINGS = [
  "synchronous_commit",
  "lock_timeout",
  "idle_in_transaction_session_timeout",
  "work_mem",
  "jit",
  "timezone",
];
/** The driver's own settings that it reads from a URL; each takes a number, or true/false. */
const DRIVER_SETTINGS = ["prepare", "fetch_types", "idle_timeout", "max_lifetime", "keep_alive", "max_pipeline"];
const SSL_MODES = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full", "true", "false"];
const SESSION_ATTRS = ["read-write", "read-only", "primary", "standby", "prefer-standby"];

/** Parameters that would undo a store option, with what to use instead. */
const REPLACED: Record<string, string> = {
  search_path: "the schema option",
  statement_timeout: "?query_timeout= (ms)",
  options: "the store's options",
  host: "a host in the URL's authority (postgres://user@host:port/db)",
  max: "the poolSize option",
};

function invalid(message: string): ThreadkeepError {
  return new ThreadkeepError("invalid_store_url", message);
}

/** One `host[:port]` of the authority (several, comma-separated, name fallback servers). */
function checkHost(host: string): void {
  let parsed: URL | undefined;
  try {
    parsed = new URL(`postgres://${host}`);
  } catch {
    // Refused below.
  }
  const port = /:(\d*)$/.exec(host.replace(/^\[[^\]]*\]/, ""))?.[1];
  if (!parsed || (port !== undefined && (port === "" || Number(port) < 1 || Number(port) > 65_535))) {
    throw invalid(`Not a host[:port] in a PostgreSQL URL: "${host}" (a port is a number from 1 to 65535)`);
  }
}

/**
 * Checks a PostgreSQL store URL: `postgres[ql]://[user[:password]@][host[:port][,host[:port]…]]/database[?params]`.
 * The parameters taken are threadkeep's `connect_timeout` and `query_timeout` and the driver's
 * `sslmode` (or `ssl`), `sslrootcert`, `sslnegotiation`, `target_session_attrs` and `application_name`.
 * @throws ThreadkeepError `invalid_store_url` naming what is wrong (never echoing the password).
 */
export function checkPostgresUrl(url: string): void {
  const scheme = /^postgres(ql)?:\/\//i.exec(url);
  if (!scheme) throw invalid("A PostgreSQL URL starts with postgres:// or postgresql://");
  const rest = url.slice(scheme[0].length);
  const end = rest.search(/[/?#]/);
  const authority = end < 0 ? rest : rest.slice(0, end);
  const at = authority.lastIndexOf("@");
  const hosts = authority.slice(at + 1);
  if (hosts !== "") hosts.split(",").forEach(checkHost);
  let parsed: URL;
  try {
    // The first host stands for all of them: the rest were checked above.
    parsed = new URL(`postgres://${authority.slice(0, at + 1)}${hosts.split(",")[0]}${end < 0 ? "" : rest.slice(end)}`);
  } catch {
    throw invalid("Not a valid PostgreSQL URL: expected postgres://user:password@host:port/database");
  }
  try {
    decodeURIComponent(parsed.username);
    decodeURIComponent(parsed.password);
    decodeURIComponent(parsed.pathname);
  } catch {
    throw invalid(
      "The user name, password or database of a PostgreSQL URL is not valid percent-encoding (write % as %25, @ as %40)",
    );
  }
  const database = /^\/([^/]+)$/.exec(parsed.pathname)?.[1];
  if (database === undefined) {
    throw invalid(
      parsed.pathname === "" || parsed.pathname === "/"
        ? "A PostgreSQL URL names its database: postgres://user@host:port/database"
        : `A PostgreSQL URL's path is one database name, got "${parsed.pathname}"`,
    );
  }
  if (parsed.hash.length > 1) throw invalid("PostgreSQL store URLs take no #fragment");
  checkParams(parsed.searchParams);
}

function checkParams(params: URLSearchParams): void {
  const seen = new Set<string>();
  for (const [name, value] of params) {
    if (seen.has(name)) throw invalid(`PostgreSQL URL parameter "${name}" is given twice`);
    seen.add(name);
    if (name in REPLACED) throw invalid(`PostgreSQL URL parameter "${name}" is not taken here: use ${REPLACED[name]}`);
    if (DRIVER_SETTINGS.includes(name)) {
      if (!/^(\d+|true|false)$/.test(value)) {
        throw invalid(`PostgreSQL URL parameter ${name} takes a whole number, true or false, got "${value}"`);
      }
      continue;
    }
    if (!OWN_PARAMS.includes(name) && !DRIVER_PARAMS.includes(name) && !SERVER_SETTINGS.includes(name)) {
      const known = [...OWN_PARAMS, ...DRIVER_PARAMS, ...DRIVER_SETTINGS, ...SERVER_SETTINGS];
      throw invalid(`Unknown PostgreSQL URL parameter "${name}": the parameters are ${known.join(", ")}`);
    }
    if ((name === "sslmode" || name === "ssl") && !SSL_MODES.includes(value)) {
      throw invalid(`PostgreSQL URL parameter ${name} must be one of ${SSL_MODES.join(", ")}, got "${value}"`);
    }
    if (name === "target_session_attrs" && !SESSION_ATTRS.includes(value)) {
      throw invalid(
        `PostgreSQL URL parameter target_session_attrs must be one of ${SESSION_ATTRS.join(", ")}, got "${value}"`,
      );
    }
  }
}
