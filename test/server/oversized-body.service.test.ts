/**
 * A body over the limit gets its 413 whatever the client: `threadkeep serve` (a process of its own,
 * default 10 MiB limit) reads and drops the rest of the body before it answers, so a client still
 * sending reads the answer instead of failing with EPIPE. Past 4× the limit more it cuts the connection,
 * and its memory does not grow with what the client keeps sending.
 */
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";
import { killServeProcesses, type ServeProcess, startServe } from "./_serve-process.js";

const MiB = 1024 * 1024;
const LIMIT = 10 * MiB;
const BOUND = 4 * LIMIT;

let fake: FakeUpstream;
let serve: ServeProcess;
let url: string;
beforeAll(async () => {
  fake = await startFakeUpstream();
  serve = startServe(["--store", "memory:", "--api-keys", "tk:acme"], fake);
  url = await serve.listening;
}, 90_000); // a serve child starts in ~2 s alone; under a loaded machine it took past 30 s
afterAll(async () => {
  killServeProcesses();
  await fake?.close();
});

/**
 * The most the two kernels' socket buffers may hold on loopback: the receiver's and the sender's
 * autotuning maximums (`tcp_rmem` and `tcp_wmem`, third field). On this kind of machine that is 32 MiB
 * + 4 MiB, far past the 16 MiB once assumed here: a loaded run that read slower saw 17 MiB over the
 * bound and failed on a figure the machine's configuration allows.
 */
function socketBuffersBytes(): number {
  const max = (name: string) => Number(readFileSync(`/proc/sys/net/ipv4/${name}`, "utf8").trim().split(/\s+/)[2]);
  return max("tcp_rmem") + max("tcp_wmem");
}

/** The server process's resident memory, from /proc. */
const rssBytes = (pid: number) =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;

const chunk = Buffer.alloc(64 * 1024, "x");

/**
 * POSTs `total` bytes on a raw socket, with a Content-Length or chunked, writing as fast as the
 * socket takes it and stopping when the server closes. Resolves when the connection ends.
 */
function rawPost(options: { total: number; chunked: boolean; key?: string }) {
  const target = new URL(url);
  return new Promise<{ response: string; written: number; writeError?: string }>((resolve) => {
    const socket = connect({ host: target.hostname, port: Number(target.port) });
    let response = "";
    let writeError: string | undefined;
    let sent = 0;
    socket.on("data", (d) => (response += d.toString("latin1")));
    socket.on("error", (error: NodeJS.ErrnoException) => (writeError ??= error.code ?? error.message));
    socket.on("close", () => resolve({ response, written: socket.bytesWritten, writeError }));
    const pump = () => {
      while (sent < options.total && !socket.destroyed) {
        const piece = chunk.subarray(0, Math.min(chunk.length, options.total - sent));
        sent += piece.length;
        const more = options.chunked
          ? [socket.write(`${piece.length.toString(16)}\r\n`), socket.write(piece), socket.write("\r\n")].every(Boolean)
          : socket.write(piece);
        if (!more) return void socket.once("drain", pump);
      }
      if (sent >= options.total && options.chunked && !socket.destroyed) socket.write("0\r\n\r\n");
    };
    socket.on("connect", () => {
      const length = options.chunked ? "transfer-encoding: chunked" : `content-length: ${options.total}`;
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: ${target.host}\r\nauthorization: Bearer ${options.key ?? "tk"}\r\n` +
          `content-type: application/json\r\n${length}\r\n\r\n`,
      );
      pump();
    });
  });
}

const body413 = (response: string) => {
  expect(response).toMatch(/^HTTP\/1\.1 413 /);
  expect(response).toMatch(/\r\nconnection: close\r\n/i);
  expect(JSON.parse(response.slice(response.indexOf("\r\n\r\n") + 4)).error).toMatchObject({
    code: "payload_too_large",
    type: "invalid_request_error",
  });
};

describe("a body over the limit", { timeout: 60_000 }, () => {
  it("gets 413 payload_too_large through Node's fetch, with a Content-Length or chunked", async () => {
    const body = Buffer.alloc(30 * MiB, "x");
    for (let attempt = 0; attempt < 3; attempt++) {
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: "Bearer tk", "content-type": "application/json" },
        body,
      });
      expect(res.status).toBe(413);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("payload_too_large");
    }
    const stream = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 30 * 16; i++) controller.enqueue(chunk);
        controller.close();
      },
    });
    const chunked = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer tk", "content-type": "application/json" },
      body: stream,
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(((await chunked.json()) as { error: { code: string } }).error.code).toBe("payload_too_large");
  });

  it("gets 413 on a raw socket that sends it all, with a Content-Length or chunked", async () => {
    for (const chunked of [false, true]) {
      const sent = await rawPost({ total: 30 * MiB, chunked });
      expect(sent.writeError, `chunked: ${chunked}`).toBeUndefined();
      body413(sent.response);
    }
  });

  it("lets a refused key's 401 reach a client still sending a large body", async () => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer wrong", "content-type": "application/json" },
      body: Buffer.alloc(5 * MiB, "x"),
    });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_api_key");
    const sent = await rawPost({ total: 30 * MiB, chunked: false, key: "wrong" });
    expect(sent.writeError).toBeUndefined();
    expect(sent.response).toMatch(/^HTTP\/1\.1 401 /);
  });

  it("is cut past 4× the limit more: the connection ends and the server's memory stays flat", async () => {
    const pid = serve.child.pid!;
    const before = rssBytes(pid);
    // A client that would send 1 GiB: it is stopped near the bound, not served to the end.
    const sent = await rawPost({ total: 1024 * MiB, chunked: true });
    // Read: the limit, then up to the bound more; plus what the two kernels' socket buffers held,
    // and the client's own writable buffer (one chunk).
    expect(sent.written).toBeGreaterThan(LIMIT);
    expect(sent.written).toBeLessThan(LIMIT + BOUND + socketBuffersBytes() + chunk.length);
    expect(rssBytes(pid) - before).toBeLessThan(64 * MiB);
    // A declared length past the bound is answered at once: nothing is read for nothing.
    const declared = await rawPost({ total: 1024 * MiB, chunked: false });
    expect(declared.written).toBeLessThan(BOUND);
    // And the server goes on serving.
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
  });
});
