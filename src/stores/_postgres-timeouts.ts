import { ThreadkeepError } from "../core/errors.js";

/** Defaults of the PostgreSQL store's timeouts: a few seconds, so a turn degrades promptly in an outage. */
export const DEFAULT_PG_CONNECT_TIMEOUT_MS = 2_000;
export const DEFAULT_PG_QUERY_TIMEOUT_MS = 5_000;

/** threadkeep's own URL parameters: read here and taken out, as the server would refuse them. */
const PARAMS = { connect: "connect_timeout", query: "query_timeout" } as const;

/** The timeouts of a PostgreSQL store, from its options, else its URL, else the defaults; and the URL for the driver. */
export function timeoutsOf(options: { url: string; connectTimeoutSeconds?: number; queryTimeoutMs?: number }): {
  url: string;
  connectTimeoutMs: number;
  queryTimeoutMs: number;
} {
  let url = options.url;
  let connectMs: number | undefined;
  let queryMs: number | undefined;
  let parsed: URL | undefined;
  try {
    parsed = new URL(options.url);
  } catch {
    // The driver reports a malformed URL itself on first use.
  }
  if (parsed && (parsed.searchParams.has(PARAMS.connect) || parsed.searchParams.has(PARAMS.query))) {
    const seconds = parsed.searchParams.get(PARAMS.connect);
    const millis = parsed.searchParams.get(PARAMS.query);
    if (seconds !== null) connectMs = positive(seconds, PARAMS.connect) * 1000;
    if (millis !== null) queryMs = positive(millis, PARAMS.query);
    parsed.searchParams.delete(PARAMS.connect);
    parsed.searchParams.delete(PARAMS.query);
    url = parsed.toString();
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
