/**
 * Profiling helper (not part of `npm run bench`): the CPU of the SQLite store's `openTurn` (lease,
 * session, window of 20, summaries, state) and of a turn's commit (two messages with `releaseLease`,
 * awaited alone, so not grouped) in this process, without HTTP. 100 sessions of 200 messages (the cap
 * the proxy reaches), turns round-robin over them.
 *
 * `DIST=<dir>,<dir>` loads the store of each build (a worktree's `dist`, from `npm run build`) into
 * this one process, each on its own file, and runs them in alternating blocks of `BLOCK` turns,
 * `ROUNDS` times after `WARMUP` turns each: on a machine others load, the load changes between two
 * runs more than a small cut does, while two blocks a few ms apart see the same machine. Prints each
 * build's median CPU per turn and the median of the blocks' differences (second build − first).
 *
 *   DIST=../base/dist,dist npx tsx bench/_open-turn-probe.ts
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { VectorStore } from "../src/core/types.js";

const BLOCK = Number(process.env.BLOCK ?? 1000);
const ROUNDS = Number(process.env.ROUNDS ?? 30);
const WARMUP = Number(process.env.WARMUP ?? 20000);
const SESSIONS = 100;
const owner = { userId: "default" };

const builds = (process.env.DIST ?? "").split(",").filter(Boolean);
const entries = builds.length > 0 ? builds.map((dir) => pathToFileURL(resolve(dir, "stores/sqlite/index.js")).href) : [new URL("../src/stores/sqlite/index.ts", import.meta.url).href];
const dir = mkdtempSync(join(tmpdir(), "threadkeep-open-turn-"));

interface Subject {
  store: VectorStore;
  ids: string[];
  next: number;
}

const pair = (i: number) => [
  { role: "user" as const, content: `Turn ${i}: what did I say before?` },
  { role: "assistant" as const, content: `This is the fake model's answer to turn ${i}, a sentence of ordinary length.` },
];

async function subject(entry: string, n: number): Promise<Subject> {
  const { createSqliteStore } = (await import(entry)) as typeof import("../src/stores/sqlite/index.js");
  const store = createSqliteStore({ path: join(dir, `t${n}.db`) });
  const ids: string[] = [];
  for (let s = 0; s < SESSIONS; s++) {
    const session = await store.createSession({ id: randomUUID(), userId: owner.userId });
    ids.push(session.id);
    for (let i = 0; i < 100; i++) await store.appendMessages(session.id, pair(i));
  }
  return { store, ids, next: 0 };
}

/** `count` turns: open (lease and reads), then commit two messages releasing the lease; µs of CPU per turn for each half. */
async function turns(s: Subject, count: number): Promise<{ open: number; commit: number }> {
  let open = 0;
  let commit = 0;
  for (let i = 0; i < count; i++) {
    const id = s.ids[s.next++ % SESSIONS];
    const a = process.cpuUsage();
    const opened = await s.store.openTurn!(id, { owner, last: 20 });
    const b = process.cpuUsage();
    await s.store.appendMessages(id, pair(s.next), { fence: opened.lease.fence, releaseLease: true, owner });
    const c = process.cpuUsage();
    open += b.user + b.system - a.user - a.system;
    commit += c.user + c.system - b.user - b.system;
  }
  return { open: open / count, commit: commit / count };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const subjects: Subject[] = [];
try {
  for (const [n, entry] of entries.entries()) subjects.push(await subject(entry, n));
  for (const s of subjects) await turns(s, WARMUP);
  const results = subjects.map(() => ({ open: [] as number[], commit: [] as number[] }));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [n, s] of subjects.entries()) {
      const { open, commit } = await turns(s, BLOCK);
      results[n].open.push(open);
      results[n].commit.push(commit);
    }
  }
  for (const [n, r] of results.entries()) {
    console.log(`${builds[n] ?? "src"}: openTurn ${median(r.open).toFixed(1)} µs, commit ${median(r.commit).toFixed(1)} µs per turn (medians of ${ROUNDS} blocks of ${BLOCK})`);
  }
  if (results.length === 2) {
    const diff = (key: "open" | "commit") => median(results[1][key].map((v, i) => v - results[0][key][i])).toFixed(1);
    console.log(`second − first, median of paired blocks: openTurn ${diff("open")} µs, commit ${diff("commit")} µs`);
  }
} finally {
  for (const s of subjects) await s.store.close();
  rmSync(dir, { recursive: true, force: true });
}
