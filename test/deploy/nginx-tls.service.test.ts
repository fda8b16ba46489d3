/**
 * The nginx recipe of docs/deployment.md, run for real: nginx with TLS (a self-signed certificate
 * this test makes with openssl) in front of threadkeep, a streamed turn through it. The fake
 * upstream sends each piece of the answer only once the client has received the one before, so a
 * proxy that buffered the stream would hold it back: the test then sees pieces arrive only at the end.
 * The same turn, sent from 127.0.0.2, must be logged with that address, not nginx's 127.0.0.1: the
 * recipe passes X-Forwarded-For and `serve --trust-proxy` (as the page gives it) believes nginx.
 * Skips with its reason where nginx or openssl is missing; under CI=true that fails (.ci/run installs nginx).
 */
import { type ChildProcess, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:https";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startNginx } from "./_nginx.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseTrustProxy } from "../../src/cli/options.js";
import { type Stack, startStack } from "../server/_stack.js";

const nginxBin = ["/usr/sbin/nginx", "nginx"].find((bin) => spawnSync(bin, ["-v"]).status === 0);
const openssl = spawnSync("openssl", ["version"]).status === 0;
const missing = !nginxBin ? "nginx (Debian package nginx)" : !openssl ? "openssl" : undefined;
if (missing && process.env.CI === "true") throw new Error(`${missing} is missing (.ci/run installs it)`);
if (missing) console.warn(`skipping the nginx recipe test: ${missing} is not installed`);

const page = readFileSync(new URL("../../docs/deployment.md", import.meta.url), "utf8");
const recipe = /```nginx\n([\s\S]*?)```/.exec(page)![1];
const trustProxy = /threadkeep serve [^\n]*--trust-proxy (\S+)/.exec(page)![1];

/** The server's request log lines, parsed. */
const logged: { msg: string; req?: { remoteAddress?: string; url?: string } }[] = [];

const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });

let dir: string;
let nginx: ChildProcess | undefined;
let stack: Stack;
let port: number;
let cert: string;

beforeAll(async () => {
  if (missing) return;
  dir = mkdtempSync(join(tmpdir(), "threadkeep-nginx-"));
  chmodSync(dir, 0o755);
  const made = spawnSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-keyout",
      join(dir, "key.pem"),
      "-out",
      join(dir, "cert.pem"),
    ],
    { encoding: "utf8" },
  );
  if (made.status !== 0) throw new Error(`openssl failed: ${made.stderr}`);
  cert = readFileSync(join(dir, "cert.pem"), "utf8");
  stack = await startStack({
    trustProxy: parseTrustProxy(trustProxy),
    logRequests: true,
    logger: { level: "info", stream: { write: (line: string) => logged.push(JSON.parse(line)) } },
  });
  port = await freePort();
  const server = recipe
    .replace("listen 443 ssl;", `listen 127.0.0.1:${port} ssl;`)
    .replace("/etc/ssl/threadkeep/fullchain.pem", join(dir, "cert.pem"))
    .replace("/etc/ssl/threadkeep/privkey.pem", join(dir, "key.pem"))
    .replace("http://127.0.0.1:8787", stack.url);
  nginx = startNginx(nginxBin!, dir, server);
  // Ready when the port accepts.
  for (let i = 0; i < 100; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = createServer()
        .listen(port, "127.0.0.1", () => socket.close(() => resolve(false)))
        .on("error", () => resolve(true));
    });
    if (open) break;
    await new Promise((r) => setTimeout(r, 50));
  }
});

afterAll(async () => {
  nginx?.kill("SIGTERM");
  await stack?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(missing !== undefined)("nginx with TLS in front (docs/deployment.md)", () => {
  it("passes a stream through unbuffered, chunk by chunk, over TLS", async () => {
    const answer = "abcdefghijklmnop"; // four pieces of four characters
    let received = "";
    let heldBack = false;
    const waiters: (() => void)[] = [];
    stack.fake.setReply(() => ({
      content: answer,
      // Piece i is sent once the client holds piece i-1; a buffering proxy would never let it.
      beforePiece: async (index) => {
        if (index === 0) return;
        const want = answer.slice(0, index * 4);
        const deadline = Date.now() + 5000;
        while (!received.includes(want)) {
          if (Date.now() > deadline) {
            heldBack = true;
            return;
          }
          await new Promise<void>((resolve) => {
            waiters.push(resolve);
            setTimeout(resolve, 50);
          });
        }
      },
    }));
    const body = JSON.stringify({
      model: "fake-model",
      stream: true,
      messages: [{ role: "user", content: "stream through nginx" }],
    });
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        // From 127.0.0.2 (loopback too), so the client's address differs from nginx's 127.0.0.1.
        {
          host: "127.0.0.1",
          localAddress: "127.0.0.2",
          port,
          path: "/v1/chat/completions",
          method: "POST",
          ca: cert,
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
        },
        (res) => {
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            for (const line of chunk.split("\n")) {
              if (!line.startsWith("data: {")) continue;
              const content = JSON.parse(line.slice(6)).choices?.[0]?.delta?.content;
              if (typeof content === "string") received += content;
            }
            waiters.splice(0).forEach((w) => w());
          });
          res.on("end", () => resolve(res.statusCode ?? 0));
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(body);
    });
    expect(status).toBe(200);
    expect(received).toBe(answer);
    expect(heldBack).toBe(false);
    // The request log names the client behind nginx, not nginx.
    const incoming = logged.filter((l) => l.msg === "incoming request" && l.req?.url === "/v1/chat/completions");
    expect(incoming).toHaveLength(1);
    expect(incoming[0]!.req!.remoteAddress).toBe("127.0.0.2");
  });
});
