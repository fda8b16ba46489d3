/**
 * What Memory's hot calls cost the Redis server, counted: the commands each one runs there (the scripts
 * and what they call, seen with MONITOR and kept by this run's key prefix), next to the client's CPU
 * per call. Commands are a count, not a time, so a loaded machine does not move them.
 *
 * `node --import tsx bench/redis-commands.ts [worktree]`: the worktree's `src` is measured (default
 * this one), so two trees can be alternated. `THREADKEEP_BENCH_REDIS_URL` (else
 * `THREADKEEP_TEST_REDIS_URL`, else redis://127.0.0.1:6379) names the server; everything is written
 * under a random key prefix and deleted afterwards.
 */
import { randomUUID } from "node:crypto";
import { resolve } from "node:path";
import { createClient } from "redis";

const root = resolve(process.argv[2] ?? ".");
const url = process.env.THREADKEEP_BENCH_REDIS_URL ?? process.env.THREADKEEP_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
// A tree from before src/create-memory.ts exported createMemory from core.
const { createMemory } = await import(`${root}/src/create-memory.ts`).catch(() => import(`${root}/src/core/memory.ts`));
const { createRedisStore } = await import(`${root}/src/stores/redis/index.ts`);

const keyPrefix = `tk-bench-${randomUUID()}:`;
const store = createRedisStore({ url, keyPrefix });
const memory = createMemory({ store });
const monitor = createClient({ url });
await monitor.connect();
const counts = new Map<string, number>();
let counting = false;
await monitor.monitor((line: string) => {
  if (!counting || !line.includes(keyPrefix)) return;
  const command = /"([A-Za-z]+)"/.exec(line)?.[1].toUpperCase() ?? "?";
  counts.set(command, (counts.get(command) ?? 0) + 1);
});

const SESSIONS = 50;
const CALLS = 2_000;
const userId = "bench";
const ids: string[] = [];
for (let i = 0; i < SESSIONS; i++) {
  const session = await memory.startSession({ userId });
  ids.push(session.id);
  await memory.addMessages(session.id, Array.from({ length: 30 }, (_, k) => ({ role: "user", content: `m${k} ${"x".repeat(200)}` })), { userId });
}

async function measure(name: string, call: (i: number) => Promise<unknown>): Promise<void> {
  counts.clear();
  counting = true;
  const cpu = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) await call(i);
  const used = process.cpuUsage(cpu);
  // MONITOR lines trail the replies.
  await new Promise((r) => setTimeout(r, 300));
  counting = false;
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  console.log(`${name}: ${(total / CALLS).toFixed(2)} commands per call ${JSON.stringify(Object.fromEntries(counts))}, client CPU ${((used.user + used.system) / CALLS).toFixed(0)} µs per call`);
}

const id = (i: number) => ids[i % SESSIONS];
await measure("append 1", (i) => memory.addMessages(id(i), [{ role: "user", content: `n${i}` }], { userId }));
await measure("load last 20", (i) => memory.getMessages(id(i), { last: 20, userId }));
await measure("turn (open with preload, commit releasing the lease)", (i) =>
  memory.runTurn(id(i), (lease: { fence: number }) => memory.addMessages(id(i), [{ role: "user", content: `t${i}` }], { userId, fence: lease.fence, releaseLease: true }), { userId, preload: true }),
);
for (const session of ids) await store.deleteSession(session);
await memory.close();
await monitor.disconnect().catch(() => {});
