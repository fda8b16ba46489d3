import { ThreadkeepError } from "../../core/errors.js";
import { checkPostgresUrl } from "./_url.js";

/** Defaults of the PostgreSQL store's timeouts: a few seconds, so a turn degrades promptly in an outage. */
export const DEFAULT_PG_CONNECT_TIMEOUT_MS = 2_000;
export const DEFAULT_PG_QUERY_TIMEOUT_MS = 5_000;
/** How often a store that is down tries the server again; the driver's reconnects wait no longer (`_client.ts`). */
export const PROBE_MS = 250;

/** threadkeep's own URL parameters: read here and taken out, as the server would refuse them. */
const PARAMS = { connect: "connect_timeout", query: "query_timeout" } as const;

/**
 * The timeouts of a PostgreSQL store, from its options, else its URL, else the defaults; and the URL for the driver.
 * @throws ThreadkeepError `invalid_store_url` for a malformed URL (see {@link checkPostgresUrl}).
 */
export function timeoutsOf(options: { url: string; connectTimeoutSeconds?: number; queryTimeoutMs?: number }): {
  url: string;
  connectTimeoutMs: number;
  queryTimeoutMs: number;
} {
  checkPostgresUrl(options.url);
  let url = options.url;
  let connectMs: number | undefined;
  let queryMs: number | undefined;
  // Not through URL: a URL naming several hosts (host1:5432,host2:5432) is not one it can parse.
  const at = url.indexOf("?");
  const params = new URLSearchParams(at < 0 ? "" : url.slice(at + 1));
  if (params.has(PARAMS.connect) || params.has(PARAMS.query)) {
    const seconds = params.get(PARAMS.connect);
    const millis = params.get(PARAMS.query);
    if (seconds !== null) connectMs = positive(seconds, PARAMS.connect) * 1000;
    if (millis !== null) queryMs = positive(millis, PARAMS.query);
    params.delete(PARAMS.connect);
    params.delete(PARAMS.query);
    const left = params.toString();
    url = url.slice(0, at) + (left ? `?${left}` : "");
  }
  return {
    url,
    connectTimeoutMs:
      options.connectTimeoutSeconds !== undefined
        ? positive(String(options.connectTimeoutSeconds), "connectTimeoutSeconds") * 1000
        : (connectMs ?? DEFAULT_PG_CONNECT_TIMEOUT_MS),
    queryTimeoutMs:
      options.queryTimeoutMs !== undefined
        ? positive(String(options.queryTimeoutMs), "queryTimeoutMs")
        : (queryMs ?? DEFAULT_PG_QUERY_TIMEOUT_MS),
  };
}

function positive(value: string, name: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) {
    throw new ThreadkeepError("invalid_store_url", `PostgreSQL ${name} must be a positive number, got "${value}"`);
  }
  return n;
}
