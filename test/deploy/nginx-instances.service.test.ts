/**
 * The "several instances" recipe of docs/deployment.md, run for real: two `threadkeep serve`
 * processes (the built CLI in dist/) on one PostgreSQL database of their own, behind the page's nginx
 * upstream block. Four turns of one session, each sending only its new message, go round-robin to
 * both instances; each turn's request to the model must carry every earlier turn in order, including
 * those the other instance answered. Skips with its reason where nginx, PostgreSQL or dist/ is
 * missing; under CI=true a missing nginx or PostgreSQL fails.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { startNginx } from "./_nginx.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";

const bin = fileURLToPath(new URL("../../dist/cli/bin.js", import.meta.url));
const nginxBin = ["/usr/sbin/nginx", "nginx"].find((b) => spawnSync(b, ["-v"]).status === 0);
const postgresUp = await serviceAvailable("postgres");
if (!nginxBin && process.env.CI === "true") throw new Error("nginx is missing (.ci/run installs it)");
const missing = !nginxBin
  ? "nginx (Debian package nginx)"
  : postgresUp !== true
    ? postgresUp
    : !existsSync(bin)
      ? "dist/ (run npm run build)"
      : undefined;
if (missing) console.warn(`skipping the several-instances recipe test: ${missing}`);

const page = readFileSync(new URL("../../docs/deployment.md", import.meta.url), "utf8");
const recipe = /<!-- recipe: several instances[^\n]*\n```nginx\n([\s\S]*?)```/.exec(page)![1];

const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });

interface Instance {
  child: ChildProcess;
  url: string;
  /** Chat turns this instance has logged (`incoming request` lines). */
  turns(): number;
}

/** Starts `threadkeep serve` from dist/ and resolves once it prints where it listens. */
function serve(store: string, upstream: string): Promise<Instance> {
  const child = spawn(
    process.execPath,
    [
      bin,
      "serve",
      "--port",
      "0",
      "--store",
      store,
      "--upstream",
      upstream,
      "--no-summaries",
      "--trust-proxy",
      "127.0.0.1",
    ],
    {
      env: {
        ...process.env,
        THREADKEEP_LOG_LEVEL: "info",
        THREADKEEP_HOST: "",
        THREADKEEP_PORT: "",
        THREADKEEP_API_KEYS: "",
        THREADKEEP_STORE: "",
        THREADKEEP_UPSTREAM_URL: "",
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stdout = "";
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  return new Promise((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      stdout += d;
      const match = /listening on (http:\/\/\S+)/.exec(stdout);
      if (match) {
        const turns = () =>
          stdout.split("\n").filter((l) => l.includes('"incoming request"') && l.includes('"/v1/chat/completions"'))
            .length;
        resolve({ child, url: match[1]!, turns });
      }
    });
    child.once("exit", (code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
  });
}

let dir: string;
let database: string;
let admin: ReturnType<typeof postgres> | undefined;
let fake: FakeUpstream;
let instances: Instance[] = [];
let nginx: ChildProcess | undefined;
let port: number;

beforeAll(async () => {
  if (missing) return;
  // A database of this test's own: the instances migrate it, and it is dropped at the end.
  database = `threadkeep_instances_${randomBytes(4).toString("hex")}`;
  admin = postgres(TEST_POSTGRES_URL, { onnotice: () => {}, max: 1 });
  await admin.unsafe(`CREATE DATABASE ${database}`);
  const store = new URL(TEST_POSTGRES_URL);
  store.pathname = `/${database}`;
  fake = await startFakeUpstream();
  instances = await Promise.all([serve(store.href, fake.url), serve(store.href, fake.url)]);
  dir = mkdtempSync(join(tmpdir(), "threadkeep-instances-"));
  chmodSync(dir, 0o755);
  port = await freePort();
  const server = recipe
    .replace("server 127.0.0.1:8787;", `server ${new URL(instances[0]!.url).host};`)
    .replace("server 127.0.0.1:8788;", `server ${new URL(instances[1]!.url).host};`)
    .replace("listen 8080;", `listen 127.0.0.1:${port};`);
  nginx = startNginx(nginxBin!, dir, server);
  // Ready when it answers.
  for (let i = 0; i < 100; i++) {
    if (
      await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    await new Promise((r) => setTimeout(r, 50));
  }
}, 60_000);

afterAll(async () => {
  nginx?.kill("SIGTERM");
  await Promise.all(
    instances.map(
      (i) =>
        new Promise((resolve) =>
          i.child.exitCode !== null ? resolve(null) : (i.child.once("exit", resolve), i.child.kill("SIGTERM")),
        ),
    ),
  );
  await fake?.close();
  if (admin) {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(missing !== undefined)("several instances behind one nginx upstream (docs/deployment.md)", () => {
  it("keeps one conversation in order while its turns alternate between the instances", async () => {
    const session = randomUUID();
    const served: number[] = [];
    for (let turn = 1; turn <= 4; turn++) {
      const before = instances.map((i) => i.turns());
      const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-session-id": session },
        body: JSON.stringify({ model: "fake-model", messages: [{ role: "user", content: `turn ${turn}` }] }),
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as any).choices[0].message.content).toBe(`echo: turn ${turn}`);
      // The request log is written before the answer goes out: the instance that took it has counted it.
      served.push(instances.findIndex((i, n) => i.turns() === before[n]! + 1));
      // The model saw every earlier turn, in order, whichever instance answered it.
      const sent = fake.chatRequests().at(-1)!.body as { messages: { role: string; content: string }[] };
      const expected = Array.from({ length: turn }, (_, k) => [
        { role: "user", content: `turn ${k + 1}` },
        ...(k + 1 < turn ? [{ role: "assistant", content: `echo: turn ${k + 1}` }] : []),
      ]).flat();
      expect(
        sent.messages.filter((m) => m.role !== "system").map((m) => ({ role: m.role, content: m.content })),
      ).toEqual(expected);
    }
    // Round-robin: both instances took turns, alternating.
    expect(served).not.toContain(-1);
    expect(served[0]).not.toBe(served[1]);
    expect(served).toEqual([served[0], served[1], served[0], served[1]]);
  });
});
