/**
 * A lean HTTP/1.1 load generator and a lean fake upstream for the proxy benches. On a machine where
 * the load generator, the fake upstream and the server share the cores, every microsecond the
 * bench's own processes spend per turn is taken from the server: `node:http` (an Agent, a
 * ClientRequest, an IncomingMessage and its stream per call, on both ends) costs more per turn than
 * some of what is measured. Here a session is one keep-alive socket with one request in flight, the
 * request is one prebuilt string, and a response is parsed only as far as its length.
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";

const HEADER_END = Buffer.from("\r\n\r\n");
const CHUNKED_END = Buffer.from("\r\n0\r\n\r\n");

/** The status and (when asked for, or not 200) the body of one response. */
export interface RawResponse {
  status: number;
  body?: string;
}

/**
 * Bytes of one HTTP message read off a socket, until its head and its `content-length` (or chunked)
 * body are in. Calls `done` with the message's bytes and where its body starts, then starts over.
 */
class MessageReader {
  #buffer: Buffer | null = null;
  #headEnd = -1;
  #total = -1;
  #chunked = false;
  readonly #done: (buffer: Buffer, headEnd: number, chunked: boolean) => void;

  constructor(done: (buffer: Buffer, headEnd: number, chunked: boolean) => void) {
    this.#done = done;
  }

  push(chunk: Buffer): void {
    const buffer = (this.#buffer = this.#buffer ? Buffer.concat([this.#buffer, chunk]) : chunk);
    if (this.#headEnd < 0) {
      const end = buffer.indexOf(HEADER_END);
      if (end < 0) return;
      this.#headEnd = end + 4;
      const head = buffer.toString("latin1", 0, end).toLowerCase();
      const at = head.indexOf("content-length:");
      this.#chunked = at < 0;
      this.#total = at < 0 ? -1 : this.#headEnd + Number.parseInt(head.slice(at + 15), 10);
    }
    const complete = this.#chunked
      ? buffer.length >= this.#headEnd + CHUNKED_END.length - 2 &&
        buffer.subarray(buffer.length - CHUNKED_END.length).equals(CHUNKED_END)
      : buffer.length >= this.#total;
    if (!complete) return;
    const headEnd = this.#headEnd;
    this.#buffer = null;
    this.#headEnd = -1;
    this.#done(buffer, headEnd, this.#chunked);
  }
}

/** The body of a chunked message (rare here: fastify and the lean upstream send a length). */
function unchunk(buffer: Buffer, from: number): string {
  let body = "";
  for (let at = from; ;) {
    const line = buffer.indexOf("\r\n", at);
    const size = Number.parseInt(buffer.toString("latin1", at, line), 16);
    if (!size) return body;
    body += buffer.toString("utf8", line + 2, line + 2 + size);
    at = line + 2 + size + 2;
  }
}

/** One keep-alive connection that sends one request at a time. */
export class RawConnection {
  readonly #socket: Socket;
  readonly #reader: MessageReader;
  readonly #head: string;
  #pending: { keep: boolean; resolve: (r: RawResponse) => void; reject: (e: Error) => void } | null = null;

  private constructor(socket: Socket, host: string) {
    this.#socket = socket;
    this.#head = `Host: ${host}\r\nContent-Type: application/json\r\n`;
    this.#reader = new MessageReader((buffer, headEnd, chunked) => {
      const pending = this.#pending!;
      this.#pending = null;
      const status = Number(buffer.toString("latin1", 9, 12));
      const keep = pending.keep || status !== 200;
      pending.resolve({
        status,
        body: keep ? (chunked ? unchunk(buffer, headEnd) : buffer.toString("utf8", headEnd)) : undefined,
      });
    });
    socket.on("data", (chunk: Buffer) => this.#reader.push(chunk));
    const fail = (error: Error) => {
      this.#pending?.reject(error);
      this.#pending = null;
    };
    socket.on("error", fail);
    socket.on("close", () => fail(new Error("connection closed")));
  }

  /** Opens a connection to `url`'s host and port. */
  static open(url: URL): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = createConnection({ host: url.hostname, port: Number(url.port) }, () => {
        socket.off("error", reject);
        socket.setNoDelay(true);
        resolve(new RawConnection(socket, url.host));
      });
      socket.once("error", reject);
    });
  }

  /** POSTs `body` (ASCII JSON) to `path` with `headers` (already `Name: value\r\n` lines); `keep` returns the body. */
  post(path: string, body: string, headers = "", keep = false): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      this.#pending = { keep, resolve, reject };
      this.#socket.write(
        `POST ${path} HTTP/1.1\r\n${this.#head}${headers}Content-Length: ${body.length}\r\n\r\n${body}`,
        "latin1",
      );
    });
  }

  close(): void {
    this.#socket.destroy();
  }
}

/**
 * A zero-latency fake upstream on 127.0.0.1 that answers every POST with a chat completion echoing
 * the last message (as test/_fake-upstream.ts does), from raw sockets. Resolves with its base URL.
 * `delayMs` holds each answer that long (a model's time to answer), without using CPU meanwhile.
 */
export function startLeanUpstream(delayMs = 0): Promise<{ url: string; server: Server }> {
  let index = 0;
  const server = createServer((socket) => {
    socket.setNoDelay(true);
    const reader = new MessageReader((buffer, headEnd) => {
      let content = "";
      try {
        const messages = JSON.parse(buffer.toString("utf8", headEnd)).messages;
        const last = messages?.[messages.length - 1]?.content;
        content = `echo: ${typeof last === "string" ? last : ""}`;
      } catch {
        // Not a chat request: an empty echo, as the proxy bench sends nothing else.
      }
      const body = JSON.stringify({
        id: `chatcmpl-lean-${++index}`,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: "fake",
        choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      });
      const answer = `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: keep-alive\r\n\r\n${body}`;
      if (delayMs > 0) setTimeout(() => socket.writable && socket.write(answer), delayMs);
      else socket.write(answer);
    });
    socket.on("data", (chunk: Buffer) => reader.push(chunk));
    socket.on("error", () => socket.destroy());
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const address = server.address() as { port: number };
      resolve({ url: `http://127.0.0.1:${address.port}/v1`, server });
    }),
  );
}
