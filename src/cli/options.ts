import { isIP } from "node:net";
import type { Command } from "commander";
import { ThreadkeepError } from "../core/errors.js";
import { DEFAULTS, parseDuration, parsePositiveInt } from "../core/policies.js";
import type { UserJwtOptions } from "../server/identity.js";
import { DEFAULT_FAIR_SHARE, type FairShareOptions, parseRate, type RateLimit } from "../server/fair-share.js";
import { parseSessionHeaders } from "../server/front-ends/session-headers.js";

/** Where the server and the CLI keep sessions unless told otherwise. */
export const DEFAULT_STORE_URL = "sqlite:./data/threadkeep.db";

/** Settings shared by `serve`, `chat` and the session commands: flags first, then env, then defaults. */
export interface ThreadkeepConfig {
  host: string;
  port: number;
  store: string;
  /** OpenAI-compatible base URL, e.g. http://127.0.0.1:11434/v1. */
  upstreamUrl?: string;
  /** The server's own key for the upstream; never taken from or shown to clients. */
  upstreamKey?: string;
  /** How long the upstream may stay silent: before its answer, and within a stream (`--upstream-timeout`). */
  upstreamTimeoutMs: number;
  /** threadkeep API key → user id. Empty: no authentication (loopback only). */
  apiKeys: Map<string, string>;
  /** The API keys flagged `:operator`: each may open any end user of its own tenant. */
  operatorKeys: Set<string>;
  /** A header the gateway names its end user in (`serve --user-header`); unset: ignored. */
  userHeader?: string;
  /** The gateway's signed end-user token (`serve --user-jwt-secret`); unset: ignored. */
  userJwt?: UserJwtOptions;
  /** Model used when a request names none (and by `threadkeep chat`). */
  model?: string;
  window: number;
  tokenBudget: number;
  maxMessages: number;
  ttlMs: number;
  /** Lifetime of a turn's lease, renewed while the turn runs: how long a crashed process holds a session. */
  leaseTtlMs: number;
  /** Largest accepted request body, in bytes. */
  bodyLimit: number;
  /** Server processes sharing the port (`serve --workers`). @default 1 */
  workers: number;
  /** The request headers that name a turn's session, in order (`serve --session-headers`). */
  sessionHeaders: string[];
  /** Which proxies may name the client in `X-Forwarded-For` (`serve --trust-proxy`): false, true (any peer) or addresses/CIDRs. */
  trustProxy: boolean | string[];
  /** Per-user and per-key limits on model requests (`serve --user-concurrency`, `--user-rate`, `--key-concurrency`, `--key-rate`). */
  fairShare: Required<FairShareOptions>;
}

/** The flag values commander hands over (all strings, all optional). */
export type ConfigFlags = Partial<
  Record<
    | "host"
    | "port"
    | "store"
    | "upstream"
    | "upstreamKey"
    | "apiKeys"
    | "model"
    | "window"
    | "tokenBudget"
    | "maxMessages"
    | "ttl"
    | "leaseTtl"
    | "bodyLimit"
    | "workers"
    | "userHeader"
    | "userJwtSecret"
    | "userJwtIssuer"
    | "userJwtHeader"
    | "sessionHeaders"
    | "upstreamTimeout"
    | "userConcurrency"
    | "userRate"
    | "keyConcurrency"
    | "keyRate"
    | "refusalDelay"
    | "trustProxy",
    string
  >
>;

/** The flag after `key:user` that makes a key an operator key. */
const OPERATOR_FLAG = ":operator";

/**
 * Parses `key1:alice,key2:bob,key3:acme:operator` into key → user, and the keys flagged `:operator`.
 * A key may contain colons (the user is what follows the last one); `k:operator` is still the user
 * `operator`, since the flag needs a `key:user` before it.
 * @throws ThreadkeepError `invalid_request` for an entry without both parts.
 */
export function parseApiKeyEntries(text: string | undefined): { keys: Map<string, string>; operators: Set<string> } {
  const keys = new Map<string, string>();
  const operators = new Set<string>();
  for (let entry of (text ?? "")
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean)) {
    const flagged = entry.endsWith(OPERATOR_FLAG) && entry.slice(0, -OPERATOR_FLAG.length).lastIndexOf(":") > 0;
    if (flagged) entry = entry.slice(0, -OPERATOR_FLAG.length);
    const colon = entry.lastIndexOf(":");
    const key = entry.slice(0, colon).trim();
    const user = entry.slice(colon + 1).trim();
    if (colon <= 0 || !key || !user) {
      throw new ThreadkeepError(
        "invalid_request",
        `Invalid API key entry "${entry.slice(0, 6)}…": expected key:user or key:user:operator`,
      );
    }
    keys.set(key, user);
    if (flagged) operators.add(key);
    else operators.delete(key);
  }
  return { keys, operators };
}

/**
 * Parses `key1:alice,key2:bob` into key → user (an `:operator` flag is read and left out: see
 * {@link parseApiKeyEntries}).
 * @throws ThreadkeepError `invalid_request` for an entry without both parts.
 */
export function parseApiKeys(text: string | undefined): Map<string, string> {
  return parseApiKeyEntries(text).keys;
}

function parseLeaseTtl(value: string | undefined): number {
  if (value === undefined) return DEFAULTS.leaseTtlMs;
  const ms = parseDuration(value);
  if (ms < 100) throw new ThreadkeepError("invalid_request", `--lease-ttl must be at least 100ms, got "${value}"`);
  return ms;
}

/** The default of `--upstream-timeout`: a local model may think this long before its first byte. */
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 120_000;

function parseUpstreamTimeout(value: string | undefined): number {
  if (value === undefined) return DEFAULT_UPSTREAM_TIMEOUT_MS;
  const ms = parseDuration(value);
  if (ms < 100)
    throw new ThreadkeepError("invalid_request", `--upstream-timeout must be at least 100ms, got "${value}"`);
  return ms;
}

/** A count where 0 (or `off`) means no limit. */
function parseCount(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (value.trim().toLowerCase() === "off") return 0;
  if (!/^\d+$/.test(value.trim()))
    throw new ThreadkeepError("invalid_request", `${name} must be a whole number (0 or off: no limit), got "${value}"`);
  return Number(value.trim());
}

function optionalRate(value: string | undefined, fallback: RateLimit | null, name: string): RateLimit | null {
  return value === undefined ? fallback : parseRate(value, name);
}

/** The end-user token settings; the issuer and header without a secret would be ignored, so they are refused. */
function resolveUserJwt(
  secret: string | undefined,
  issuer: string | undefined,
  header: string | undefined,
): UserJwtOptions | undefined {
  if (secret === undefined) {
    if (issuer !== undefined || header !== undefined) {
      throw new ThreadkeepError(
        "invalid_request",
        "--user-jwt-issuer and --user-jwt-header need --user-jwt-secret (or THREADKEEP_USER_JWT_SECRET)",
      );
    }
    return undefined;
  }
  return { secret, ...(issuer === undefined ? {} : { issuer }), ...(header === undefined ? {} : { header }) };
}

/**
 * `--trust-proxy`: off/false, on/true, or a comma-separated list of addresses, CIDRs and
 * proxy-addr's names (`loopback`, `linklocal`, `uniquelocal`). No hop count: fastify 5 trusts no
 * peer for one, since a hop count cannot tell a proxy from a client that sends the header itself.
 * @throws ThreadkeepError `invalid_request` naming the option.
 */
export function parseTrustProxy(value: string | undefined): boolean | string[] {
  const text = value?.trim().toLowerCase();
  if (text === undefined || text === "" || text === "off" || text === "false") return false;
  if (text === "on" || text === "true") return true;
  const entries = text
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean);
  const names = new Set(["loopback", "linklocal", "uniquelocal"]);
  for (const entry of entries) {
    const [address, bits, extra] = entry.split("/");
    const ok =
      extra === undefined &&
      (names.has(entry) || (isIP(address!) !== 0 && (bits === undefined || /^\d{1,3}$/.test(bits))));
    if (!ok)
      throw new ThreadkeepError(
        "invalid_request",
        `--trust-proxy must be on, off, or the proxies' addresses/CIDRs separated by commas (e.g. 127.0.0.1,10.0.0.0/8), got "${value}"`,
      );
  }
  return entries;
}

function parsePort(value: string | undefined): number {
  if (value === undefined) return 8787;
  const port = Number(value.trim());
  if (!/^\d+$/.test(value.trim()) || port > 65535)
    throw new ThreadkeepError("invalid_request", `--port must be a port number (0-65535), got "${value}"`);
  return port;
}

/** Resolves settings from flags, then THREADKEEP_* environment variables, then defaults. */
export function resolveConfig(flags: ConfigFlags = {}, env: NodeJS.ProcessEnv = process.env): ThreadkeepConfig {
  const pick = (flag: keyof ConfigFlags, name: string) => flags[flag] ?? (env[name] || undefined);
  const store = pick("store", "THREADKEEP_STORE") ?? DEFAULT_STORE_URL;
  const ttl = pick("ttl", "THREADKEEP_TTL");
  const keys = parseApiKeyEntries(pick("apiKeys", "THREADKEEP_API_KEYS"));
  return {
    host: pick("host", "THREADKEEP_HOST") ?? "127.0.0.1",
    port: parsePort(pick("port", "THREADKEEP_PORT")),
    store,
    upstreamUrl: pick("upstream", "THREADKEEP_UPSTREAM_URL")?.replace(/\/+$/, ""),
    upstreamKey: pick("upstreamKey", "THREADKEEP_UPSTREAM_API_KEY"),
    upstreamTimeoutMs: parseUpstreamTimeout(pick("upstreamTimeout", "THREADKEEP_UPSTREAM_TIMEOUT")),
    apiKeys: keys.keys,
    operatorKeys: keys.operators,
    userHeader: pick("userHeader", "THREADKEEP_USER_HEADER"),
    userJwt: resolveUserJwt(
      pick("userJwtSecret", "THREADKEEP_USER_JWT_SECRET"),
      pick("userJwtIssuer", "THREADKEEP_USER_JWT_ISSUER"),
      pick("userJwtHeader", "THREADKEEP_USER_JWT_HEADER"),
    ),
    model: pick("model", "THREADKEEP_MODEL"),
    window: parsePositiveInt(pick("window", "THREADKEEP_WINDOW") ?? DEFAULTS.window, "window"),
    tokenBudget: parsePositiveInt(
      pick("tokenBudget", "THREADKEEP_TOKEN_BUDGET") ?? DEFAULTS.tokenBudget,
      "token budget",
    ),
    maxMessages: parsePositiveInt(
      pick("maxMessages", "THREADKEEP_MAX_MESSAGES") ?? DEFAULTS.maxMessages,
      "max messages",
    ),
    ttlMs: ttl !== undefined ? parseDuration(ttl) : store.startsWith("memory:") ? DEFAULTS.memoryTtlMs : DEFAULTS.ttlMs,
    leaseTtlMs: parseLeaseTtl(pick("leaseTtl", "THREADKEEP_LEASE_TTL")),
    bodyLimit: parsePositiveInt(pick("bodyLimit", "THREADKEEP_BODY_LIMIT") ?? 10 * 1024 * 1024, "body limit"),
    workers: parsePositiveInt(pick("workers", "THREADKEEP_WORKERS") ?? 1, "workers"),
    sessionHeaders: parseSessionHeaders(pick("sessionHeaders", "THREADKEEP_SESSION_HEADERS")),
    trustProxy: parseTrustProxy(pick("trustProxy", "THREADKEEP_TRUST_PROXY")),
    fairShare: {
      userConcurrency: parseCount(
        pick("userConcurrency", "THREADKEEP_USER_CONCURRENCY"),
        DEFAULT_FAIR_SHARE.userConcurrency,
        "--user-concurrency",
      ),
      userRate: optionalRate(pick("userRate", "THREADKEEP_USER_RATE"), DEFAULT_FAIR_SHARE.userRate, "--user-rate"),
      keyConcurrency: parseCount(
        pick("keyConcurrency", "THREADKEEP_KEY_CONCURRENCY"),
        DEFAULT_FAIR_SHARE.keyConcurrency,
        "--key-concurrency",
      ),
      keyRate: optionalRate(pick("keyRate", "THREADKEEP_KEY_RATE"), DEFAULT_FAIR_SHARE.keyRate, "--key-rate"),
      refusalDelayMs: parseDuration(
        pick("refusalDelay", "THREADKEEP_REFUSAL_DELAY") ?? DEFAULT_FAIR_SHARE.refusalDelayMs,
      ),
    },
  };
}

/** Adds the store and memory flags every command that opens a store understands. */
export function addStoreOptions(command: Command): Command {
  return command
    .option("--store <url>", `session store URL (env THREADKEEP_STORE; default ${DEFAULT_STORE_URL})`)
    .option("--window <n>", `recent messages sent to the model (env THREADKEEP_WINDOW; default ${DEFAULTS.window})`)
    .option("--token-budget <n>", `context token budget (env THREADKEEP_TOKEN_BUDGET; default ${DEFAULTS.tokenBudget})`)
    .option(
      "--max-messages <n>",
      `messages kept per session (env THREADKEEP_MAX_MESSAGES; default ${DEFAULTS.maxMessages})`,
    )
    .option("--ttl <duration>", "inactivity expiry, e.g. 7d or 30m (env THREADKEEP_TTL; default 7d, 30m for memory:)")
    .option(
      "--lease-ttl <duration>",
      `lifetime of a turn's lease, renewed while the turn runs: how long a crashed process holds a session (env THREADKEEP_LEASE_TTL; default ${DEFAULTS.leaseTtlMs / 1000}s)`,
    );
}

/** Adds the upstream model flags (`serve`, `chat`). */
export function addUpstreamOptions(command: Command): Command {
  return command
    .option(
      "--upstream <url>",
      "OpenAI-compatible base URL, e.g. http://127.0.0.1:11434/v1 (env THREADKEEP_UPSTREAM_URL)",
    )
    .option("--upstream-key <key>", "API key for the upstream (env THREADKEEP_UPSTREAM_API_KEY)")
    .option(
      "--upstream-timeout <duration>",
      "give up on the upstream when it stays silent this long: before its answer, or mid-stream (env THREADKEEP_UPSTREAM_TIMEOUT; default 120s)",
    )
    .option("--model <name>", "model to use when a request names none (env THREADKEEP_MODEL)");
}
