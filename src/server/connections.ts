/**
 * Slow and greedy clients at the connection level: how long a request's headers and body may take to
 * arrive, how long a connection may sit silent with no request in progress, and how many connections
 * the server holds at once. A streamed reply whose reader stops reading is bounded in turn/stream.ts.
 *
 * Node's http server has the headers and request time-outs (a new connection counts as a request
 * begun, so one that sends nothing is cut by the headers time-out too), but checks them only every
 * `connectionsCheckingInterval`, 30 s by default; fastify leaves `requestTimeout` off. So by default
 * a client trickling its headers held its connection 60 to 90 s. Here the check runs often enough for
 * the bound to be the time-out itself (within a second), and the time-outs are shorter.
 */
import type { ServerOptions as HttpServerOptions, IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { FastifyInstance, FastifyServerOptions } from "fastify";
import { ThreadkeepError } from "../core/errors.js";
import { errorBody } from "./errors.js";
import type { ServerMetrics } from "./metrics.js";

/** Bounds on slow and greedy clients (all times in milliseconds). */
export interface ClientLimits {
  /** Time for a request's headers to arrive, from its first byte; then 408 and the connection closes. @default 20000 */
  headersTimeoutMs?: number;
  /** Time for a whole request, headers and body, to arrive; then 408 and the connection closes. @default 120000 */
  requestTimeoutMs?: number;
  /**
   * A kept-alive connection closes after this long without a new request. Keep it above a load
   * balancer's own idle time-out (60 s on most). (A new connection must send its headers within
   * `headersTimeoutMs`.) @default 72000
   */
  idleTimeoutMs?: number;
  /**
   * Open connections. Past it a new connection is answered `503 too_many_connections` (with
   * `Retry-After`) and closed; past it by an eighth more (at least 8), it is closed unanswered. @default 4096
   */
  maxConnections?: number;
  /**
   * A streamed reply whose client reads nothing for this long (its buffers full) is cut, and the turn
   * stored with what was delivered, marked incomplete; a whole reply (JSON) not read within this long
   * of being handed over has its connection closed. @default 30000
   */
  streamStallTimeoutMs?: number;
}

/** The defaults of {@link ClientLimits}. */
export const CLIENT_LIMIT_DEFAULTS: Readonly<Required<ClientLimits>> = {
  headersTimeoutMs: 20_000,
  requestTimeoutMs: 120_000,
  idleTimeoutMs: 72_000,
  maxConnections: 4096,
  streamStallTimeoutMs: 30_000,
};

/** How long a connection past the limit has to send the request that is answered 503. */
const OVER_LIMIT_WAIT_MS = 2000;

/** How often, at most, Node looks for requests past their time-out: a trickler is cut within this of its bound. */
const MAX_CHECK_INTERVAL_MS = 1000;

/**
 * Fills in the defaults and checks the values.
 * @throws ThreadkeepError `invalid_request` for a value that is not a positive whole number, or headers
 *   allowed longer than the whole request.
 */
export function resolveClientLimits(limits: ClientLimits = {}): Required<ClientLimits> {
  const resolved = { ...CLIENT_LIMIT_DEFAULTS };
  for (const [key, value] of Object.entries(limits) as [keyof ClientLimits, number | undefined][]) {
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value) || value <= 0) {
      throw new ThreadkeepError(
        "invalid_request",
        `${key} must be a positive whole number, got ${JSON.stringify(value)}`,
      );
    }
    resolved[key] = value;
  }
  if (resolved.headersTimeoutMs > resolved.requestTimeoutMs) {
    throw new ThreadkeepError(
      "invalid_request",
      `The headers time-out (${resolved.headersTimeoutMs} ms) cannot be longer than the request time-out (${resolved.requestTimeoutMs} ms)`,
    );
  }
  return resolved;
}

/** Extra sockets past `maxConnections` that are accepted only to be told 503. */
export function refusalRoom(maxConnections: number): number {
  return Math.max(8, Math.ceil(maxConnections / 8));
}

/** What a socket is doing, for the time-outs' metrics and answers. */
interface SocketState {
  /** The latest request on it and its response. */
  request?: IncomingMessage;
  response?: ServerResponse;
  /** Accepted past the limit: its request is answered 503. */
  overLimit: boolean;
}

/** The fastify options a {@link ConnectionGuard} sets. */
export type GuardServerOptions = Pick<
  FastifyServerOptions,
  "requestTimeout" | "keepAliveTimeout" | "clientErrorHandler"
> & {
  http: HttpServerOptions;
};

/** The bounds of {@link ClientLimits} applied to one server: fastify options, then {@link ConnectionGuard.install}. */
export interface ConnectionGuard {
  /** Options to merge into the fastify options: the time-outs and the handler of requests that fail to arrive. */
  serverOptions: GuardServerOptions;
  /** Installs the connection limit and the metrics of timed-out connections; call before any other `onRequest` hook. */
  install(app: FastifyInstance): void;
}

/**
 * Creates the guard of one server: Node's headers and request time-outs (checked often enough for
 * the bound to hold), the keep-alive (idle) time-out, the connection limit, and OpenAI-style 408/431/400 answers
 * for requests that arrive too slowly or malformed, each counted in the metrics.
 */
export function createConnectionGuard(limits: Required<ClientLimits>, metrics: ServerMetrics): ConnectionGuard {
  const sockets = new WeakMap<Socket, SocketState>();
  const checkEvery = Math.max(10, Math.min(MAX_CHECK_INTERVAL_MS, Math.floor(limits.headersTimeoutMs / 4)));
  const serverOptions: GuardServerOptions = {
    // fastify hands `http` to http.createServer, then sets requestTimeout and keepAliveTimeout itself.
    http: {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: checkEvery,
    },
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.idleTimeoutMs,
    clientErrorHandler: (error, socket) => answerClientError(error, socket, sockets.get(socket), metrics),
  };
  return { serverOptions, install: (app) => install(app, limits, metrics, sockets) };
}

function install(
  app: FastifyInstance,
  limits: Required<ClientLimits>,
  metrics: ServerMetrics,
  sockets: WeakMap<Socket, SocketState>,
): void {
  const server: Server = app.server;
  let open = 0;
  server.maxConnections = limits.maxConnections + refusalRoom(limits.maxConnections);
  server.on("drop", () => metrics.connectionsRefused.inc({ how: "dropped" }));
  server.on("connection", (socket: Socket) => {
    const state: SocketState = { overLimit: open >= limits.maxConnections };
    sockets.set(socket, state);
    if (state.overLimit) {
      // Only to be told 503: it gets little time to send its request.
      socket.setTimeout(Math.min(limits.headersTimeoutMs, OVER_LIMIT_WAIT_MS));
    } else {
      open++;
      metrics.connectionsOpen.set(open);
      socket.once("close", () => metrics.connectionsOpen.set(--open));
    }
    socket.on("timeout", () => {
      // Node's own listener closes the socket (a kept-alive one after idleTimeoutMs); here it is counted.
      const stalled = state.response !== undefined && state.response.writableEnded && !state.response.writableFinished;
      metrics.clientTimeouts.inc({ kind: stalled ? "reply_stall" : "idle" });
    });
  });
  server.on("request", (request: IncomingMessage, response: ServerResponse) => {
    const state = sockets.get(request.socket);
    if (!state) return;
    state.request = request;
    state.response = response;
    // A reply handed over whole (`end()` called) that the client does not read would hold its bytes
    // and the connection for as long as the client likes: Node sets no time-out until it is flushed.
    // The socket's inactivity time-out (reset by every write that goes out) bounds it; Node replaces
    // it with the keep-alive one once the reply is flushed. (A streamed reply bounds its own waits in
    // turn/stream.ts; this covers its tail and every JSON reply.)
    response.once("prefinish", () => {
      if (!response.writableFinished) request.socket.setTimeout(limits.streamStallTimeoutMs);
    });
  });
  app.addHook("onRequest", async (request, reply) => {
    if (!sockets.get(request.raw.socket)?.overLimit) return;
    metrics.connectionsRefused.inc({ how: "answered" });
    return reply
      .code(503)
      .header("retry-after", "1")
      .header("connection", "close")
      .send(
        errorBody(
          503,
          "too_many_connections",
          `The server holds its limit of ${limits.maxConnections} connections; retry shortly.`,
        ),
      );
  });
}

/**
 * Answers what Node's parser or time-outs refused before fastify saw a request: an OpenAI error body
 * with a stable code, then the connection closes (as Node and fastify do by default, with their own bodies).
 */
function answerClientError(
  error: NodeJS.ErrnoException,
  socket: Socket,
  state: SocketState | undefined,
  metrics: ServerMetrics,
): void {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  let status = 400;
  let code = "invalid_request";
  let message = "The request could not be read as HTTP.";
  if (error.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    const kind = state?.request && !state.request.complete ? "body" : "headers";
    metrics.clientTimeouts.inc({ kind });
    status = 408;
    code = "request_timeout";
    message = `The request's ${kind === "body" ? "body" : "headers"} did not arrive in time.`;
  } else if (error.code === "HPE_HEADER_OVERFLOW") {
    status = 431;
    code = "headers_too_large";
    message = "The request's headers are too large.";
  }
  metrics.error(code);
  // A reply already under way cannot take another status line: the connection is only closed.
  const replying = state?.response !== undefined && state.response.headersSent && !state.response.writableFinished;
  if (socket.writable && !replying) {
    const body = JSON.stringify(errorBody(status, code, message));
    const reason =
      status === 408 ? "Request Timeout" : status === 431 ? "Request Header Fields Too Large" : "Bad Request";
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
