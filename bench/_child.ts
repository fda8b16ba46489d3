/**
 * What the proxy benches share: a bench script started again in a child process in some role (the
 * server, the fake upstream) that prints `READY <url>` when it listens, one keep-alive POST timed,
 * and CPU time read from /proc.
 */
import { type ChildProcess, spawn } from "node:child_process";
import cluster from "node:cluster";
import { readFileSync } from "node:fs";
import { type Agent, request as httpRequest } from "node:http";

/** Starts `script` (a bench file) in a role, with `env` and node `flags`, and waits for the URL it prints. */
export function startChild(
  script: string,
  role: string,
  env: Record<string, string> = {},
  flags: string[] = [],
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [...flags, "--import", "tsx", script], {
    env: { ...process.env, ...env, BENCH_PROXY_ROLE: role },
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (d) => {
      out += d;
      const match = /READY (\S+)/.exec(out);
      if (match) resolve({ child, url: match[1] });
    });
    child.once("exit", (code) => reject(new Error(`${role} exited with ${code} before it was ready`)));
  });
}

/** One POST with a keep-alive agent; resolves with its latency in microseconds (and the body, with `keep`). */
export function post(
  agent: Agent,
  url: URL,
  body: string,
  headers: Record<string, string>,
  keep?: (body: string) => void,
): Promise<number> {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    const headersOut = { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers };
    const req = httpRequest(url, { method: "POST", agent, headers: headersOut }, (res) => {
      let text = "";
      res.on("data", (chunk) => {
        if (keep || res.statusCode !== 200) text += chunk;
      });
      res.on("end", () => {
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
        const micros = (performance.now() - start) * 1000;
        keep?.(text);
        resolve(micros);
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** User + system CPU of a /proc `stat` file (a process or one of its threads), in µs; 0 when it is gone. */
export function statCpuMicros(path: string): number {
  try {
    // After "(comm) ": utime and stime are fields 14 and 15 of the line, in clock ticks of 10 ms (USER_HZ 100).
    const fields = readFileSync(path, "utf8")
      .replace(/^.*\) /s, "")
      .split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return 0;
  }
}

/** CPU time (user + system) of a process and its children (a cluster's workers), in µs, from /proc. */
export function treeCpuMicros(pid: number): number {
  let children: string[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
  } catch {
    // The process ended.
  }
  return statCpuMicros(`/proc/${pid}/stat`) + children.reduce((sum, child) => sum + treeCpuMicros(Number(child)), 0);
}

/**
 * In the primary of a server role with `workers` above 1: forks them (node:cluster, as `serve --workers N`
 * does), prints `READY <url>` once each reported its URL, stops them on SIGTERM, and returns true; else
 * (one process, or a worker) returns false and the caller runs the server itself.
 */
export function forkWorkers(workers: number): boolean {
  if (workers <= 1 || !cluster.isPrimary) return false;
  let ready = 0;
  for (let i = 0; i < workers; i++) {
    cluster.fork().on("message", (message: { url?: string }) => {
      if (message.url && ++ready === workers) process.stdout.write(`READY ${message.url}\n`);
    });
  }
  process.once("SIGTERM", () => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGTERM");
    cluster.on("exit", () => Object.keys(cluster.workers ?? {}).length === 0 && process.exit(0));
  });
  return true;
}

/** What a server role prints when it listens at `url`: READY on stdout, or to the primary from a cluster worker. */
export function announce(url: string): void {
  if (cluster.isWorker) process.send?.({ url });
  else process.stdout.write(`READY ${url}\n`);
}
