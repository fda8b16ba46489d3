/**
 * The slow-client bounds of `serve`: headers, body and idle time-outs, the connection limit and the
 * stall time-out of streamed replies (see server/connections.ts). Flags first, then environment,
 * then the server's defaults.
 */
import type { Command } from "commander";
import { parseDuration, parsePositiveInt } from "../core/policies.js";
import { CLIENT_LIMIT_DEFAULTS, type ClientLimits } from "../server/connections.js";

/** The flags commander hands over. */
export interface ClientFlags {
  headersTimeout?: string;
  requestTimeout?: string;
  idleTimeout?: string;
  maxConnections?: string;
  streamStallTimeout?: string;
}

const seconds = (ms: number) => `${ms / 1000}s`;

/** Adds the slow-client flags to `serve`. */
export function addClientOptions(command: Command): Command {
  const d = CLIENT_LIMIT_DEFAULTS;
  return command
    .option(
      "--headers-timeout <duration>",
      `time for a request's headers to arrive, then 408 (env THREADKEEP_HEADERS_TIMEOUT; default ${seconds(d.headersTimeoutMs)})`,
    )
    .option(
      "--request-timeout <duration>",
      `time for a whole request, headers and body, to arrive, then 408 (env THREADKEEP_REQUEST_TIMEOUT; default ${seconds(d.requestTimeoutMs)})`,
    )
    .option(
      "--idle-timeout <duration>",
      `a kept-alive connection closes after this long without a new request; keep it above a load balancer's idle time-out (env THREADKEEP_IDLE_TIMEOUT; default ${seconds(d.idleTimeoutMs)})`,
    )
    .option(
      "--max-connections <n>",
      `open connections; past it a new one is answered 503 too_many_connections (env THREADKEEP_MAX_CONNECTIONS; default ${d.maxConnections})`,
    )
    .option(
      "--stream-stall-timeout <duration>",
      `a reply whose client stops reading is cut after this long (a stream's turn is stored incomplete) (env THREADKEEP_STREAM_STALL_TIMEOUT; default ${seconds(d.streamStallTimeoutMs)})`,
    );
}

/**
 * Resolves the bounds from flags, then THREADKEEP_* environment variables; unset ones keep the
 * server's defaults. Durations take `ms`, `s`, `m` (a bare number is milliseconds).
 * @throws ThreadkeepError `invalid_request` for a value that does not parse.
 */
export function resolveClientFlags(flags: ClientFlags, env: NodeJS.ProcessEnv = process.env): ClientLimits {
  const pick = (flag: keyof ClientFlags, name: string) => flags[flag] ?? (env[name] || undefined);
  const duration = (flag: keyof ClientFlags, name: string) => {
    const value = pick(flag, name);
    return value === undefined ? undefined : parseDuration(value);
  };
  const max = pick("maxConnections", "THREADKEEP_MAX_CONNECTIONS");
  return {
    headersTimeoutMs: duration("headersTimeout", "THREADKEEP_HEADERS_TIMEOUT"),
    requestTimeoutMs: duration("requestTimeout", "THREADKEEP_REQUEST_TIMEOUT"),
    idleTimeoutMs: duration("idleTimeout", "THREADKEEP_IDLE_TIMEOUT"),
    maxConnections: max === undefined ? undefined : parsePositiveInt(max, "max connections"),
    streamStallTimeoutMs: duration("streamStallTimeout", "THREADKEEP_STREAM_STALL_TIMEOUT"),
  };
}
