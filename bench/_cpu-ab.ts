/**
 * Profiling helper (not part of `npm run bench`): two builds of the server compared side by side on a
 * machine others load. Both servers (each from a worktree's compiled `dist`, each on its own fresh
 * SQLite file) run at once behind one lean fake upstream; the load generator drives them in
 * alternating blocks of `BLOCK` chat turns at 100 sessions, `ROUNDS` times after `WARMUP` turns of
 * each API per server, and reads each server's CPU (all its threads, from /proc) around its block.
 * Two blocks a second or two apart see the same machine, so the median of the paired differences
 * says more than two runs minutes apart, whose load differs by more than a small cut.
 *
 *   npx tsx bench/_cpu-ab.ts ../base/dist dist
 *   MODE=responses BLOCK=2000 ROUNDS=20 npx tsx bench/_cpu-ab.ts ../base/dist dist
 *   WORKERS=2 npx tsx bench/_cpu-ab.ts ../base/dist dist      each build as `serve --workers 2`
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { startChild, treeCpuMicros } from "./_child.js";
import { RawConnection } from "./_raw-http.js";

const BLOCK = Number(process.env.BLOCK ?? 2000);
const ROUNDS = Number(process.env.ROUNDS ?? 15);
const WARMUP = Number(process.env.WARMUP ?? 8000);
const SESSIONS = 100;
const MODE = (process.env.MODE ?? "chat") as "chat" | "responses";
/** `WORKERS=2`: each build runs as `serve --workers 2` does (node:cluster, the lease in the file); its CPU is all its processes'. */
const WORKERS = Number(process.env.WORKERS ?? 1);

/** One server's sessions, kept across blocks so their history grows as a long-running server's does. */
interface Subject {
  dist: string;
  pid: number;
  base: URL;
  sessions: { header: string; previous: string; turn: number }[];
  path: string;
}

async function open(dist: string, store: string, upstream: string): Promise<Subject & { kill(): void }> {
  const probe = fileURLToPath(new URL("./_cpu-probe.ts", import.meta.url));
  const { child, url } = await startChild(probe, "server", { DIST: resolve(dist), CPU_PROBE_ROLE: "server", BENCH_STORE: store, BENCH_UPSTREAM: upstream, BENCH_WORKERS: String(WORKERS) });
  const base = new URL(url.replace(/\/v1$/, ""));
  return {
    dist,
    pid: child.pid!,
    base,
    sessions: Array.from({ length: SESSIONS }, () => ({ header: `X-Session-ID: ${randomUUID()}\r\n`, previous: "", turn: 0 })),
    path: `${base.pathname.replace(/\/$/, "")}/v1/${MODE === "chat" ? "chat/completions" : "responses"}`,
    kill: () => child.kill("SIGTERM"),
  };
}

/** `total` turns over the subject's sessions (each session's turns one after another); returns the server's CPU µs per turn. */
async function block(s: Subject, total: number, api: "chat" | "responses" = MODE): Promise<number> {
  const path = s.path.replace(/chat\/completions$|responses$/, api === "chat" ? "chat/completions" : "responses");
  const perSession = Math.ceil(total / SESSIONS);
  // Connections of a block's own: one kept idle through the other server's blocks could outlive the
  // server's keep-alive timeout. Opening them is counted in the block, the same for both servers.
  const before = treeCpuMicros(s.pid);
  const connections = await Promise.all(Array.from({ length: SESSIONS }, () => RawConnection.open(s.base)));
  await Promise.all(
    connections.map(async (connection, n) => {
      const session = s.sessions[n];
      for (let i = 0; i < perSession; i++) {
        const input = `Turn ${session.turn++}: what did I say before?`;
        const response =
          api === "chat"
            ? await connection.post(path, `{"model":"fake","messages":[{"role":"user","content":"${input}"}]}`, session.header)
            : await connection.post(path, `{"model":"fake","input":"${input}"${session.previous ? `,"previous_response_id":"${session.previous}"` : ""}}`, "", true);
        if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${response.body?.slice(0, 300)}`);
        if (api === "responses") session.previous = JSON.parse(response.body!).id;
      }
    }),
  );
  for (const connection of connections) connection.close();
  return (treeCpuMicros(s.pid) - before) / (perSession * SESSIONS);
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const dists = process.argv.slice(2);
if (dists.length !== 2) throw new Error("usage: npx tsx bench/_cpu-ab.ts <dist A> <dist B>");
const dir = mkdtempSync(join(tmpdir(), "threadkeep-cpu-ab-"));
const upstream = await startChild(fileURLToPath(new URL("./proxy.ts", import.meta.url)), "upstream");
const subjects: (Subject & { kill(): void })[] = [];
try {
  for (const [n, dist] of dists.entries()) subjects.push(await open(dist, `sqlite:${join(dir, `ab${n}.db`)}`, upstream.url));
  for (const s of subjects) {
    // Each worker sees 1/WORKERS of the turns: WORKERS times the warm-up warms each as one server.
    await block(s, WARMUP * WORKERS, "chat");
    await block(s, WARMUP * WORKERS, "responses");
  }
  const cpu = subjects.map(() => [] as number[]);
  for (let round = 0; round < ROUNDS; round++) {
    // Which server goes first alternates, so neither always follows the other's block.
    const order = round % 2 === 0 ? [0, 1] : [1, 0];
    for (const n of order) cpu[n].push(await block(subjects[n], BLOCK));
  }
  for (const [n, s] of subjects.entries()) console.log(`${s.dist}: ${Math.round(median(cpu[n]))} µs per ${MODE} turn (median of ${ROUNDS} blocks of ${BLOCK}; ${cpu[n].map(Math.round).join(" ")})`);
  const diffs = cpu[1].map((v, i) => v - cpu[0][i]);
  console.log(`B − A, median of paired blocks: ${Math.round(median(diffs))} µs per turn (${diffs.map(Math.round).join(" ")})`);
} finally {
  for (const s of subjects) s.kill();
  upstream.child.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
}
