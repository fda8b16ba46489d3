/**
 * An answer sent before the request body was read (a 413 for a body over the limit, a 401 before
 * it) must reach a client that is still sending. Closing the connection under it makes most
 * clients (Node's `fetch`, Python's `requests`) fail with EPIPE or ECONNRESET and never read the
 * answer; so the server reads and discards what is still coming, up to a bound, then answers and closes.
 */
import type { IncomingMessage } from "node:http";
import type { FastifyInstance } from "fastify";

/** How many times the body limit the server discards before it cuts a connection instead. */
export const DRAIN_FACTOR = 4;

/** How long the server waits for the rest of a refused body before it cuts the connection. */
export const DRAIN_TIMEOUT_MS = 30_000;

/** Options of {@link installBodyDrain}. */
export interface BodyDrainOptions {
  /** The server's body limit; up to {@link DRAIN_FACTOR} times it is read and discarded. */
  bodyLimit: number;
  /** @default DRAIN_TIMEOUT_MS */
  timeoutMs?: number;
}

/**
 * Before an answer goes out on a request whose body is still arriving, discards the rest of the
 * body (at most `DRAIN_FACTOR × bodyLimit` bytes more, within the timeout), so the client has sent
 * it all and reads the answer; the connection closes after it. Past the bound the answer is sent at
 * once and the connection closed: the client may then see the connection end instead of the answer.
 * Nothing is kept: the bytes are counted and dropped.
 */
export function installBodyDrain(app: FastifyInstance, options: BodyDrainOptions): void {
  const maxBytes = DRAIN_FACTOR * options.bodyLimit;
  const timeoutMs = options.timeoutMs ?? DRAIN_TIMEOUT_MS;
  app.addHook("onSend", async (request, reply, payload) => {
    const raw = request.raw;
    if (raw.complete || raw.readableEnded || raw.destroyed) return payload;
    reply.header("connection", "close");
    await drain(raw, maxBytes, timeoutMs);
    return payload;
  });
}

/** Reads and drops `raw` until it ends, closes, passes `maxBytes` or `timeoutMs` passes. @returns true when it ended. */
export function drain(raw: IncomingMessage, maxBytes: number, timeoutMs: number): Promise<boolean> {
  // A declared length past the bound would only be cut later, after reading the bound for nothing.
  const declared = Number(raw.headers["content-length"]);
  if (Number.isFinite(declared) && declared > maxBytes) return Promise.resolve(false);
  return new Promise((resolve) => {
    let received = 0;
    const done = (ended: boolean) => {
      clearTimeout(timer);
      raw.off("data", onData).off("end", onEnd).off("close", onClose).off("error", onClose);
      resolve(ended);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxBytes) done(false);
    };
    const onEnd = () => done(true);
    const onClose = () => done(false);
    const timer = setTimeout(() => done(false), timeoutMs);
    raw.on("data", onData).on("end", onEnd).on("close", onClose).on("error", onClose);
    raw.resume();
  });
}
