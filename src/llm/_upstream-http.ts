/**
 * The HTTP transport of the upstream client: one keep-alive connection pool per upstream, a request
 * with a timeout, cancellation and one retry on a stale kept-alive connection, the response whole or
 * as a stream of chunks. Built on undici's `dispatch`: per call it costs about half of node:http's
 * `ClientRequest` and agent bookkeeping, which was the largest part of a proxied turn's CPU after the
 * socket writes.
 */
import { Client, type Dispatcher, Pool } from "undici";
import { outgoingTraceHeaders, tracingOn } from "../core/tracing.js";

/** A response of the upstream: the head, and the body whole (`text`) or as it arrives (`body`). */
export interface RawResponse {
  status: number;
  ok: boolean;
  /** The client headers of the response (see `pickHeaders`). */
  headers: Record<string, string>;
  /** The whole body, when it was read whole (always for a status outside 2xx). */
  text?: string;
  /** The body as it arrives, when it was not read whole. */
  body?: AsyncIterable<Buffer>;
}

/** Sends one request; `whole` reads the body before resolving (the timeout then covers it too). */
export type SendRequest = (
  method: "GET" | "POST",
  path: string,
  body: unknown,
  signal: AbortSignal | undefined,
  whole: boolean,
) => Promise<RawResponse>;

/** Socket failures that, before any answer, mean a kept-alive connection was already closed. */
const STALE = new Set(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE"]);
/** Chunks of a streamed body held before the upstream's socket is paused. */
const HIGH_WATER = 16;

/** A streamed response body: chunks queue up until read, the socket pauses while too many wait. */
class BodyChunks implements AsyncIterable<Buffer> {
  readonly #chunks: Buffer[] = [];
  #ended = false;
  #error: unknown;
  #wake?: () => void;
  #resume?: () => void;

  constructor(private readonly stop: () => void) {}

  /** Adds a chunk; false asks the transport to pause. */
  push(chunk: Buffer, resume: () => void): boolean {
    this.#chunks.push(chunk);
    this.#wake?.();
    if (this.#chunks.length < HIGH_WATER) return true;
    this.#resume = resume;
    return false;
  }

  end(error?: unknown): void {
    this.#ended = true;
    this.#error = error;
    this.#wake?.();
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return {
      next: async () => {
        while (this.#chunks.length === 0 && !this.#ended) await new Promise<void>((wake) => (this.#wake = wake));
        this.#wake = undefined;
        const chunk = this.#chunks.shift();
        if (this.#chunks.length === 0 && this.#resume) {
          const resume = this.#resume;
          this.#resume = undefined;
          resume();
        }
        if (chunk) return { value: chunk, done: false };
        if (this.#error !== undefined) throw this.#error;
        return { value: undefined, done: true };
      },
      // A reader that stops early (an error, `break`) closes the connection, as node:http's does.
      return: async () => {
        if (!this.#ended) this.stop();
        return { value: undefined, done: true };
      },
    };
  }
}

/** The client headers of a raw header list (`[name, value, …]`), by lower-case name; repeats joined. */
function pickHeaders(raw: Buffer[] | string[] | null, keep: RegExp): Record<string, string> {
  const picked: Record<string, string> = {};
  if (!raw) return picked;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i].toString("latin1").toLowerCase();
    if (!keep.test(name)) continue;
    const value = raw[i + 1].toString("latin1");
    picked[name] = picked[name] === undefined ? value : `${picked[name]}, ${value}`;
  }
  return picked;
}

/** Options of {@link createSender}. */
export interface SenderOptions {
  base: URL;
  headers: Record<string, string>;
  timeoutMs: number;
  /** Response headers passed on to the client. */
  clientHeader: RegExp;
  /** The error for an upstream that gave no (complete) answer; `timedOut` when it went silent past `timeoutMs`. */
  unreachable: (reason: string, cause: unknown, timedOut?: boolean) => Error;
}

/** A request function over one keep-alive pool to `base`'s origin. */
export function createSender(options: SenderOptions): SendRequest {
  const { base, timeoutMs, clientHeader, unreachable } = options;
  const prefix = base.pathname.replace(/\/+$/, "");
  const headers = { ...options.headers };
  // Credentials in the URL become Basic auth, as node:http did, unless a key was given.
  if (base.username && !headers.authorization) {
    headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(base.username)}:${decodeURIComponent(base.password)}`).toString("base64")}`;
  }
  // Our own timer bounds each call (the head for a stream, the whole body otherwise), so undici's
  // are off; its connect timeout sits past ours so the message is always "timed out".
  const timeouts = { headersTimeout: 0, bodyTimeout: 0, connectTimeout: timeoutMs + 1000 };
  const pool = new Pool(base.origin, timeouts);

  const send = (
    method: "GET" | "POST",
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
    whole: boolean,
    retried: boolean,
  ) =>
    new Promise<RawResponse>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      let abort: ((error: Error) => void) | undefined;
      let stopped: Error | undefined;
      let settled = false;
      let responded = false;
      let timedOut = false;
      let stalled = false;
      let idle: NodeJS.Timeout | undefined;
      let stream: BodyChunks | undefined;
      let resumeStream: (() => void) | undefined;
      let status = 0;
      let picked: Record<string, string> = {};
      const chunks: Buffer[] = [];

      const stop = (error: Error) => {
        stopped ??= error;
        abort?.(error);
      };
      const timer = setTimeout(() => {
        timedOut = true;
        stop(new Error("timeout"));
        // Before it reached a connection a request has nothing to abort yet: answer now.
        if (!abort) fail(stopped);
      }, timeoutMs);
      const onAbort = () => {
        stop(signal?.reason instanceof Error ? signal.reason : new Error("aborted"));
        if (!abort) fail(stopped);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      // A stream's silence is timed only while its reader waits for more: a paused socket (the
      // reader, e.g. a slow client, is behind) is not the upstream's silence.
      const armIdle = () => {
        clearTimeout(idle);
        idle = setTimeout(() => {
          timedOut = true;
          stalled = true;
          stop(new Error("stalled"));
        }, timeoutMs);
      };
      const finish = () => {
        clearTimeout(timer);
        clearTimeout(idle);
        signal?.removeEventListener("abort", onAbort);
      };
      const settle = (response: RawResponse) => {
        settled = true;
        clearTimeout(timer);
        resolve(response);
      };
      function fail(error: unknown) {
        finish();
        if (stream) {
          const reason = stalled
            ? unreachable(`timed out: the stream sent nothing for ${timeoutMs} ms`, error, true)
            : error;
          return stream.end(signal?.aborted ? signal.reason : reason);
        }
        if (settled) return;
        settled = true;
        const code = (error as { code?: string } | undefined)?.code;
        // A request that failed on a connection which had answered before (its socket had read
        // bytes), with no answer to it, never reached the upstream: it is sent once more on a new
        // connection, as the other idle ones may be just as stale. An error that says nothing of its
        // socket (a reset of a fresh connection) is not retried: the upstream may have the request.
        const socket = (error as { socket?: { bytesRead?: number } } | undefined)?.socket;
        if (
          !retried &&
          !responded &&
          !timedOut &&
          !signal?.aborted &&
          code &&
          STALE.has(code) &&
          (socket?.bytesRead ?? 0) > 0
        ) {
          send(method, path, body, signal, whole, true).then(resolve, reject);
          return;
        }
        if (signal?.aborted) reject(signal.reason);
        else if (timedOut) reject(unreachable(`timed out: no answer within ${timeoutMs} ms`, error, true));
        else reject(unreachable(String((error as Error)?.message ?? error), error));
      }

      // undici 7 marks these callbacks deprecated in favour of the controller ones (`onResponseStart`,
      // …), but its HTTP/1.1 client still calls these: a handler of the new kind is unwrapped into them,
      // its headers parsed into an object on every response. These are the path without that step.
      const handler: Dispatcher.DispatchHandler = {
        onConnect(abortRequest) {
          abort = abortRequest;
          if (stopped) abortRequest(stopped);
        },
        onHeaders(statusCode, rawHeaders, resume) {
          // An informational (1xx) head is followed by the real one.
          if (statusCode < 200) return true;
          responded = true;
          status = statusCode;
          picked = pickHeaders(rawHeaders, clientHeader);
          if (whole || status < 200 || status >= 300) return true;
          stream = new BodyChunks(() => stop(new Error("aborted")));
          resumeStream = () => {
            armIdle();
            resume();
          };
          settle({ status, ok: true, headers: picked, body: stream });
          armIdle();
          return true;
        },
        onData(chunk) {
          if (stream) {
            clearTimeout(idle);
            const more = stream.push(chunk, resumeStream as () => void);
            if (more) armIdle();
            return more;
          }
          chunks.push(chunk);
          return true;
        },
        onComplete() {
          finish();
          if (stream) return stream.end();
          const text = chunks.length === 1 ? chunks[0].toString("utf8") : Buffer.concat(chunks).toString("utf8");
          settle({ status, ok: status >= 200 && status < 300, headers: picked, text });
        },
        onError: fail,
      };
      const payload = body === undefined ? null : Buffer.from(JSON.stringify(body));
      // With tracing on, the W3C traceparent of the active span (the model call) goes along.
      const sent = tracingOn() ? { ...headers, ...outgoingTraceHeaders() } : headers;
      const request = { path: prefix + path, method, headers: sent, body: payload };
      if (!retried) {
        pool.dispatch(request, handler);
        return;
      }
      const fresh = new Client(base.origin, timeouts);
      fresh.dispatch(request, handler);
      // Closes once this request is done.
      void fresh.close();
    });

  return (method, path, body, signal, whole) => send(method, path, body, signal, whole, false);
}
