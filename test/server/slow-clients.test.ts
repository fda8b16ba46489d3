/**
 * Slow and greedy clients, through the real server with short bounds: headers that trickle in, a
 * body that trickles in, a connection that says nothing, a streamed reply nobody reads, and more
 * connections than the limit. Each is cut (or refused) within its bound, answered with an OpenAI
 * error body where an answer can still be read, and counted in the metrics.
 */
import { randomUUID } from "node:crypto";
import { createServer, type Server, type ServerResponse } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { ClientLimits } from "../../src/server/connections.js";
import { type Stack, type StackOptions, startStack } from "./_stack.js";

const HEADERS_MS = 300;
const REQUEST_MS = 600;
const IDLE_MS = 300;
const STALL_MS = 400;
/** What a bound may overrun by on a busy machine (Node checks requests every headers/4, at most 1 s). */
const SLACK_MS = 1500;

let stack: Stack | undefined;
let extraServer: Server | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await stack?.close();
  stack = undefined;
  await new Promise<void>((resolve) => (extraServer ? extraServer.close(() => resolve()) : resolve()));
  extraServer = undefined;
});

async function start(clients: ClientLimits = {}, options: StackOptions = {}): Promise<Stack> {
  stack = await startStack({
    clients: { headersTimeoutMs: HEADERS_MS, requestTimeoutMs: REQUEST_MS, streamStallTimeoutMs: STALL_MS, ...clients },
    ...options,
  });
  return stack;
}

/** A raw connection to the server that records what it receives and when it closes. */
function open(url: string): Promise<{ socket: Socket; received: () => string; closed: Promise<number> }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: target.hostname, port: Number(target.port) });
    sockets.push(socket);
    let text = "";
    socket.on("data", (d) => (text += d.toString("latin1")));
    socket.on("error", () => {});
    const closed = new Promise<number>((done) => socket.on("close", () => done(Date.now())));
    socket.once("connect", () => resolve({ socket, received: () => text, closed }));
    socket.once("error", reject);
  });
}

/** Writes `pieces` one every `everyMs` until the socket closes. */
function trickle(socket: Socket, pieces: string[], everyMs: number): void {
  const timer = setInterval(() => {
    const piece = pieces.shift();
    if (piece === undefined || socket.destroyed) return clearInterval(timer);
    socket.write(piece);
  }, everyMs);
  socket.once("close", () => clearInterval(timer));
}

const bodyOf = (response: string) => JSON.parse(response.slice(response.indexOf("\r\n\r\n") + 4));

const metric = async (url: string, line: string) => {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(new RegExp(`^${line.replace(/[{}"]/g, "\\$&")} (\\d+)`, "m").exec(text)?.[1] ?? 0);
};

describe("slow clients", { timeout: 20_000 }, () => {
  it("cuts a client whose headers trickle in (slowloris) within the headers time-out, with a 408", async () => {
    const { url } = await start();
    const client = await open(url);
    const started = Date.now();
    client.socket.write("POST /v1/chat/completions HTTP/1.1\r\n");
    trickle(
      client.socket,
      Array.from({ length: 100 }, (_, i) => `x-trickle-${i}: ${i}\r\n`),
      50,
    );
    const closedAt = await client.closed;
    expect(closedAt - started).toBeGreaterThanOrEqual(HEADERS_MS - 50);
    expect(closedAt - started).toBeLessThan(HEADERS_MS + SLACK_MS);
    expect(client.received()).toMatch(/^HTTP\/1\.1 408 /);
    expect(bodyOf(client.received()).error).toMatchObject({ code: "request_timeout", type: "invalid_request_error" });
    expect(await metric(url, 'threadkeep_client_timeouts_total{kind="headers"}')).toBe(1);
  });

  it("cuts a client whose body trickles in within the request time-out, with a 408", async () => {
    const { url, fake } = await start();
    const client = await open(url);
    const started = Date.now();
    const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(200) }] });
    client.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
    );
    trickle(client.socket, body.match(/.{1,5}/gs) ?? [], 50);
    const closedAt = await client.closed;
    expect(closedAt - started).toBeGreaterThanOrEqual(REQUEST_MS - 50);
    expect(closedAt - started).toBeLessThan(REQUEST_MS + SLACK_MS);
    expect(client.received()).toMatch(/^HTTP\/1\.1 408 /);
    expect(bodyOf(client.received()).error.code).toBe("request_timeout");
    expect(await metric(url, 'threadkeep_client_timeouts_total{kind="body"}')).toBe(1);
    expect(fake.chatRequests()).toHaveLength(0);
  });

  it("cuts a connection that sends nothing within the headers time-out", async () => {
    const { url } = await start();
    const silent = await open(url);
    const started = Date.now();
    const closedAt = await silent.closed;
    expect(closedAt - started).toBeGreaterThanOrEqual(HEADERS_MS - 50);
    expect(closedAt - started).toBeLessThan(HEADERS_MS + SLACK_MS);
    expect(bodyOf(silent.received()).error.code).toBe("request_timeout");
  });

  it("closes a kept-alive connection after the idle time-out", async () => {
    const { url } = await start({ idleTimeoutMs: IDLE_MS });
    const kept = await open(url);
    kept.socket.write("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    await new Promise<void>((resolve) => kept.socket.once("data", () => resolve()));
    const answeredAt = Date.now();
    const closedAt = await kept.closed;
    expect(kept.received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(closedAt - answeredAt).toBeGreaterThanOrEqual(IDLE_MS - 50);
    expect(closedAt - answeredAt).toBeLessThan(IDLE_MS + SLACK_MS);
    expect(await metric(url, 'threadkeep_client_timeouts_total{kind="idle"}')).toBe(1);
  });

  it("answers 408 to a second request on a kept-alive connection whose headers stop coming", async () => {
    const { url } = await start();
    const kept = await open(url);
    kept.socket.write("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    await new Promise<void>((resolve) => kept.socket.once("data", () => resolve()));
    kept.socket.write("GET /healthz HTTP/1.1\r\nhost: x\r\n");
    await kept.closed;
    const second = kept.received().slice(kept.received().indexOf("HTTP/1.1", 10));
    expect(second).toMatch(/^HTTP\/1\.1 408 /);
    expect(bodyOf(second).error.code).toBe("request_timeout");
  });

  it("answers what Node cannot read as HTTP with an OpenAI error body and closes", async () => {
    const { url } = await start();
    const garbage = await open(url);
    garbage.socket.write("HELLO THERE\r\n\r\n");
    await garbage.closed;
    expect(garbage.received()).toMatch(/^HTTP\/1\.1 400 /);
    expect(bodyOf(garbage.received()).error).toMatchObject({ code: "invalid_request", type: "invalid_request_error" });

    const huge = await open(url);
    huge.socket.write(`GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: ${"b".repeat(20_000)}\r\n\r\n`);
    await huge.closed;
    expect(huge.received()).toMatch(/^HTTP\/1\.1 431 /);
    expect(bodyOf(huge.received()).error.code).toBe("headers_too_large");
  });

  it("does not cut a reply that takes longer than the request and idle time-outs, streamed or not", async () => {
    const { url, fake } = await start({ idleTimeoutMs: IDLE_MS });
    const slow = REQUEST_MS + 200;
    fake.setReply(() => ({ content: "slow", delayMs: slow }));
    for (const stream of [true, false]) {
      const started = Date.now();
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-session-id": randomUUID() },
        body: JSON.stringify({ model: "m", stream, messages: [{ role: "user", content: "hi" }] }),
      });
      const text = await res.text();
      expect(Date.now() - started).toBeGreaterThanOrEqual(slow);
      expect(res.status).toBe(200);
      expect(text).toContain(stream ? "data: [DONE]" : '"content":"slow"');
    }
    expect(await metric(url, 'threadkeep_client_timeouts_total{kind="idle"}')).toBe(0);
    expect(await metric(url, 'threadkeep_client_timeouts_total{kind="body"}')).toBe(0);
  });

  it("answers a connection past the limit 503 too_many_connections, and serves again once one closes", async () => {
    // Long enough headers time-out that the held connections, which send nothing, stay.
    const { url } = await start({ maxConnections: 3, headersTimeoutMs: 5000, requestTimeoutMs: 5000 });
    const held = await Promise.all([open(url), open(url), open(url)]);
    const extra = await open(url);
    extra.socket.write("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    await extra.closed;
    expect(extra.received()).toMatch(/^HTTP\/1\.1 503 /);
    expect(extra.received()).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(extra.received()).toMatch(/\r\nconnection: close\r\n/i);
    expect(bodyOf(extra.received()).error).toMatchObject({ code: "too_many_connections", type: "server_error" });

    held[0].socket.destroy();
    await held[0].closed;
    // The server sees the close a moment after the client does.
    let status = 0;
    for (let attempt = 0; attempt < 50 && status !== 200; attempt++) {
      const again = await open(url);
      again.socket.write("GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
      await again.closed;
      status = Number(/^HTTP\/1\.1 (\d+)/.exec(again.received())?.[1]);
      if (status !== 200) await new Promise((r) => setTimeout(r, 20));
    }
    expect(status).toBe(200);
    expect(await metric(url, 'threadkeep_connections_refused_total{how="answered"}')).toBeGreaterThanOrEqual(1);
  });

  it("closes a connection whose client does not read a large JSON reply, after the stall time-out", async () => {
    const { url, fake } = await start();
    fake.setReply(() => ({ content: "r".repeat(8 * 1024 * 1024) }));
    const client = await open(url);
    client.socket.removeAllListeners("data");
    client.socket.pause();
    const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "a long answer please" }] });
    client.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    );
    const started = Date.now();
    await waitFor(
      async () =>
        (await metric(url, 'threadkeep_client_timeouts_total{kind="reply_stall"}')) === 1 ? true : undefined,
      STALL_MS + 15_000,
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(STALL_MS);
    // The turn itself completed: the reply was stored before it was sent.
    expect(await metric(url, 'threadkeep_turns_total{outcome="ok",stream="false"}')).toBe(1);
    // Reading again, the client finds what was in the buffers and then the end: the rest never came.
    let got = 0;
    client.socket.on("data", (d: Buffer) => (got += d.length));
    client.socket.resume();
    await client.closed;
    expect(got).toBeGreaterThan(0);
    expect(got).toBeLessThan(8 * 1024 * 1024);
  });

  it("cuts a stream whose reader stops reading, stores the turn incomplete, and holds the stream's memory bounded", async () => {
    // An upstream with a long reply that it writes only as fast as it is read, counting what left it.
    const TOTAL = 64 * 1024 * 1024;
    const piece = "a".repeat(8192);
    let upstreamSent = 0;
    let upstreamCut = false;
    extraServer = createServer(async (req, res: ServerResponse) => {
      for await (const _ of req);
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.on("close", () => (upstreamCut ||= !res.writableFinished));
      const frame = `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] })}\n\n`;
      while (upstreamSent < TOTAL && !res.destroyed) {
        upstreamSent += piece.length;
        if (!res.write(frame)) await drainedOrClosed(res);
      }
      res.end("data: [DONE]\n\n");
    });
    await new Promise<void>((resolve) => extraServer!.listen(0, "127.0.0.1", resolve));
    const upstreamUrl = `http://127.0.0.1:${(extraServer.address() as AddressInfo).port}/v1`;
    const { url, memory } = await start({}, { upstream: { baseUrl: upstreamUrl, apiKey: "k" } });

    const id = randomUUID();
    const client = await open(url);
    const body = JSON.stringify({
      model: "m",
      stream: true,
      messages: [{ role: "user", content: "tell me everything" }],
    });
    client.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-session-id: ${id}\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    );
    // Read until the stream has begun, then stop reading.
    await new Promise<void>((resolve) => {
      const check = () => client.received().includes("data: ") && (client.socket.pause(), resolve());
      client.socket.on("data", check);
    });
    const stoppedAt = Date.now();

    const stored = await waitFor(async () => {
      const messages = await memory.getMessages(id).catch(() => []);
      return messages.length === 2 ? messages : undefined;
    }, STALL_MS + 10_000);
    const cutAfter = Date.now() - stoppedAt;
    expect(stored[0]).toMatchObject({ role: "user", content: "tell me everything" });
    expect(stored[1]).toMatchObject({ role: "assistant", incomplete: true });
    const partial = stored[1].content as string;
    expect(partial.length).toBeGreaterThan(0);
    expect(partial).toMatch(/^a+$/);
    // Cut after the stall time-out, not before and not much after (the buffers fill first).
    expect(cutAfter).toBeGreaterThanOrEqual(STALL_MS);
    expect(cutAfter).toBeLessThan(STALL_MS + 5000);
    expect(await metric(url, 'threadkeep_client_timeouts_total{kind="stream_stall"}')).toBe(1);
    expect(await metric(url, 'threadkeep_turns_total{outcome="incomplete",stream="true"}')).toBe(1);
    // Backpressure reached the upstream: the server held no more than the socket buffers could, far
    // from the whole reply, and the upstream call was aborted.
    await waitFor(async () => (upstreamCut ? true : undefined));
    expect(upstreamSent).toBeLessThan(TOTAL / 2);
    expect(partial.length).toBeLessThanOrEqual(upstreamSent);
  });
});

async function waitFor<T>(fn: () => Promise<T | undefined>, timeoutMs = 5000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 20));
  }
}

function drainedOrClosed(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done).off("close", done);
      resolve();
    };
    res.on("drain", done).on("close", done);
  });
}
