/**
 * The soak: `npm run soak -- --minutes N [--store sqlite|memory|file|postgres|redis|all] [--interval S]`.
 * Mixed load for N minutes per store on a server in a child process of its own (the process that is
 * measured): chat turns (plain and streamed) on a fixed pool of sessions capped at 20 messages, so the
 * data stops growing once every session is full; summaries (a summarizer on the fake upstream, in the
 * background) and embeddings of every message (the fake's embedding model); full-text and
 * semantic searches; context reads. The fake upstream runs in this process, never in the measured one.
 *
 * Every `--interval` seconds (10; less for short runs, so a run has at least 12 samples) the server
 * reports its RSS, its heap used after a full GC (`--expose-gc`: what is retained, not garbage yet to
 * be collected), its active handles (`process.getActiveResourcesInfo()`), its open file descriptors
 * (/proc/self/fd) and the p99 of its event-loop delay over the interval (`monitorEventLoopDelay`).
 *
 * The verdict, per store: the first 20% of the run is warm-up (JIT, caches, pools, the sessions
 * filling to their cap). Of the rest, the last third is compared with the first third, each by its
 * median: heap and RSS may grow by at most 10% + 8 MiB, handles and descriptors by at most 20% + 10
 * (a sample counts the sockets of the requests in flight at that instant, to the clients and to the
 * upstream, and connection pools grow and shrink: a leak of one per turn is thousands within the
 * run, far past that), event-loop p99 by at most 2× + 20 ms (the machine is shared, so a single
 * interval says little; a creep shows in the median). Any 5xx, or a load error, fails the run too.
 * Exit status 0 when every store is flat, 1 otherwise.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { DEFAULT_SUMMARY_INSTRUCTIONS } from "../src/llm/summarizer.js";
import { startFakeUpstream } from "../test/_fake-upstream.js";
import { serviceAvailable, TEST_POSTGRES_URL, TEST_REDIS_URL } from "../test/_services.js";

const STORES = ["memory", "file", "sqlite", "postgres", "redis"] as const;
type StoreName = (typeof STORES)[number];

/** One report of the server's resources. */
export interface Sample {
  /** Seconds since the load started. */
  t: number;
  rssMiB: number;
  heapMiB: number;
  handles: number;
  fds: number;
  loopP99Ms: number;
}

/** The verdict on one store's samples (see the file's comment for the tolerances). */
export interface Verdict {
  flat: boolean;
  /** Per metric: median of the first third after warm-up, of the last third, and whether within tolerance. */
  metrics: Record<keyof Omit<Sample, "t">, { first: number; last: number; ok: boolean }>;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Judges samples: warm-up dropped (the first 20% of the run), last third against first third. */
export function judge(samples: Sample[], seconds: number): Verdict {
  const steady = samples.filter((s) => s.t >= seconds * 0.2);
  const third = Math.max(1, Math.floor(steady.length / 3));
  const first = steady.slice(0, third);
  const last = steady.slice(-third);
  const limits: Record<keyof Omit<Sample, "t">, (a: number) => number> = {
    rssMiB: (a) => a * 1.1 + 8,
    heapMiB: (a) => a * 1.1 + 8,
    handles: (a) => a * 1.2 + 10,
    fds: (a) => a * 1.2 + 10,
    loopP99Ms: (a) => a * 2 + 20,
  };
  const metrics = {} as Verdict["metrics"];
  for (const key of Object.keys(limits) as (keyof typeof limits)[]) {
    const a = median(first.map((s) => s[key]));
    const b = median(last.map((s) => s[key]));
    metrics[key] = { first: a, last: b, ok: steady.length >= 3 && b <= limits[key](a) };
  }
  return { flat: Object.values(metrics).every((m) => m.ok), metrics };
}

/** Child role: the measured server. */
async function runServer(): Promise<void> {
  const { createServer } = await import("../src/server/index.js");
  const { createSummarizer } = await import("../src/llm/summarizer.js");
  const { createEmbedder } = await import("../src/llm/embedder.js");
  const upstream = process.env.SOAK_UPSTREAM as string;
  const server = await createServer({
    memory: {
      store: process.env.SOAK_STORE as string,
      maxMessages: 20,
      window: 8,
      summarizer: createSummarizer({ baseUrl: upstream }),
      compaction: { background: true, threshold: 4 },
      embedder: createEmbedder({ baseUrl: upstream, model: "fake-embed" }),
    },
    upstream,
    // One user makes all of the load: the per-user limits (serve's defaults) would refuse part of it.
    fairShare: false,
    port: 0,
    logger: false,
  });
  await server.memory.store();
  const url = await server.listen();
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const started = performance.now();
  const interval = Number(process.env.SOAK_INTERVAL_MS);
  const gc = (globalThis as { gc?: () => void }).gc;
  setInterval(() => {
    gc?.();
    const memory = process.memoryUsage();
    const sample: Sample = {
      t: Math.round((performance.now() - started) / 1000),
      rssMiB: memory.rss / 2 ** 20,
      heapMiB: memory.heapUsed / 2 ** 20,
      handles: process.getActiveResourcesInfo().length,
      fds: readdirSync("/proc/self/fd").length,
      loopP99Ms: delay.percentile(99) / 1e6,
    };
    delay.reset();
    process.stdout.write(`SAMPLE ${JSON.stringify(sample)}\n`);
  }, interval).unref();
  process.stdout.write(`READY ${url}\n`);
  process.once("SIGTERM", () => server.close().then(() => process.exit(0)));
}

/** Starts the server child for one store; resolves with its URL, and collects its samples. */
function startServer(
  store: string,
  upstream: string,
  intervalMs: number,
): Promise<{ child: ChildProcess; url: string; samples: Sample[] }> {
  const child = spawn(process.execPath, ["--expose-gc", "--import", "tsx", fileURLToPath(import.meta.url)], {
    env: {
      ...process.env,
      SOAK_ROLE: "server",
      SOAK_STORE: store,
      SOAK_UPSTREAM: upstream,
      SOAK_INTERVAL_MS: String(intervalMs),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const samples: Sample[] = [];
  let stderr = "";
  child.stderr?.on("data", (d) => (stderr = (stderr + d).slice(-4000)));
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (d) => {
      out += d;
      let nl: number;
      while ((nl = out.indexOf("\n")) >= 0) {
        const line = out.slice(0, nl);
        out = out.slice(nl + 1);
        if (line.startsWith("READY ")) resolve({ child, url: line.slice(6), samples });
        else if (line.startsWith("SAMPLE ")) samples.push(JSON.parse(line.slice(7)) as Sample);
      }
    });
    child.once("exit", (code) => reject(new Error(`server exited with ${code}: ${stderr}`)));
  });
}

const WORDS = [
  "car",
  "automobile",
  "budget",
  "invoice",
  "weather",
  "rain",
  "travel",
  "flight",
  "recipe",
  "pasta",
  "garden",
  "tomato",
];
const pick = <T>(xs: readonly T[]) => xs[Math.floor(Math.random() * xs.length)];

/** The load: `workers` loops, each doing a random action after another until `until`. */
async function load(
  url: string,
  sessions: string[],
  workers: number,
  until: number,
  fulltext: boolean,
): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  const count = (key: string) => (counts[key] = (counts[key] ?? 0) + 1);
  const one = async () => {
    const r = Math.random();
    const session = pick(sessions);
    const text = `Tell me about the ${pick(WORDS)} and the ${pick(WORDS)}, turn ${randomUUID().slice(0, 8)}.`;
    let res: Response;
    let kind: string;
    if (r < 0.6) {
      const stream = r < 0.25;
      kind = stream ? "stream" : "turn";
      res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-session-id": session },
        body: JSON.stringify({ model: "fake-model", stream, messages: [{ role: "user", content: text }] }),
      });
    } else if (r < 0.8) {
      // The in-memory, file and Redis stores have no full-text index (501 not_supported): substring there.
      const mode = r >= 0.7 ? "auto" : fulltext ? "fulltext" : "substring";
      kind = `search-${mode}`;
      res = await fetch(`${url}/v1/search?q=${pick(WORDS)}&limit=5&mode=${mode}`);
    } else {
      kind = "context";
      res = await fetch(`${url}/v1/sessions/${session}/context`);
    }
    await res.arrayBuffer();
    count(`${kind} ${res.status >= 500 ? "5xx" : res.status}`);
  };
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (Date.now() < until) {
        try {
          await one();
        } catch (error) {
          count(`error ${(error as Error).message}`);
        }
      }
    }),
  );
  return counts;
}

const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(1));

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      minutes: { type: "string", default: "1" },
      store: { type: "string", default: "all" },
      interval: { type: "string" },
      workers: { type: "string", default: "6" },
    },
  });
  const minutes = Number(values.minutes);
  const seconds = minutes * 60;
  const intervalS = Number(values.interval ?? Math.min(10, seconds / 12));
  const names = values.store === "all" ? [...STORES] : (values.store!.split(",") as StoreName[]);
  const fake = await startFakeUpstream();
  fake.setReply((body) => {
    if (body?.messages?.[0]?.content === DEFAULT_SUMMARY_INSTRUCTIONS)
      return { content: "The user asked about several topics." };
    return {};
  });
  // The fake records every request: keep its log short, it lives in this process (not the measured one).
  const trim = setInterval(() => fake.requests.splice(0, fake.requests.length), 1000);
  const dir = mkdtempSync(join(tmpdir(), "tk-soak-"));
  console.log(
    `soak: ${minutes} min per store, samples every ${intervalS} s; ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), load average ${loadavg()[0].toFixed(1)}; node ${process.version}; ${new Date().toISOString()}`,
  );
  let allFlat = true;
  try {
    for (const name of names) {
      if (name === "postgres" || name === "redis") {
        const ok = await serviceAvailable(name);
        if (ok !== true) {
          console.log(`\n${name}: skipped: ${ok}`);
          continue;
        }
      }
      const storeUrl = {
        memory: "memory:",
        file: `file:${join(dir, "file-store")}`,
        sqlite: `sqlite:${join(dir, "soak.db")}`,
        postgres: TEST_POSTGRES_URL,
        redis: TEST_REDIS_URL,
      }[name];
      const server = await startServer(storeUrl, fake.url, intervalS * 1000);
      const sessions = Array.from({ length: 24 }, () => randomUUID());
      let counts: Record<string, number>;
      try {
        counts = await load(
          server.url,
          sessions,
          Number(values.workers),
          Date.now() + seconds * 1000,
          name === "sqlite" || name === "postgres",
        );
        // The last sample may be due: wait for it.
        await new Promise((r) => setTimeout(r, 200));
        await Promise.all(
          sessions.map((id) => fetch(`${server.url}/v1/sessions/${id}`, { method: "DELETE" }).catch(() => {})),
        );
      } finally {
        await new Promise((resolve) => {
          server.child.once("exit", resolve);
          server.child.kill("SIGTERM");
        });
      }
      const verdict = judge(server.samples, seconds);
      const failed = Object.entries(counts).filter(([k]) => /5xx|error/.test(k));
      const flat = verdict.flat && failed.length === 0;
      allFlat &&= flat;
      console.log(
        `\n${name}: ${Object.entries(counts)
          .sort()
          .map(([k, v]) => `${k}: ${v}`)
          .join(", ")}`,
      );
      console.log("   t s  RSS MiB  heap MiB  handles  fds  loop p99 ms");
      for (const s of server.samples)
        console.log(
          `${String(s.t).padStart(6)}  ${s.rssMiB.toFixed(1).padStart(7)}  ${s.heapMiB.toFixed(1).padStart(8)}  ${String(s.handles).padStart(7)}  ${String(s.fds).padStart(3)}  ${s.loopP99Ms.toFixed(1).padStart(11)}`,
        );
      const parts = Object.entries(verdict.metrics).map(
        ([k, m]) => `${k} ${fmt(m.first)} → ${fmt(m.last)}${m.ok ? "" : " (CREEP)"}`,
      );
      console.log(
        `${name}: ${flat ? "flat after warm-up" : "NOT flat"}: ${parts.join(", ")}${failed.length ? `; failures: ${failed.map(([k, v]) => `${k} ×${v}`).join(", ")}` : ""}`,
      );
    }
  } finally {
    clearInterval(trim);
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`\nverdict: ${allFlat ? "flat after warm-up" : "NOT flat"}`);
  return allFlat ? 0 : 1;
}

if (process.env.SOAK_ROLE === "server") await runServer();
else process.exitCode = await main();
