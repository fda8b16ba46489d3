/**
 * A probe for profiling: `TURNS` sequential store turns of one session (open the turn, then the
 * releasing append with the proxy's cap), as bench/postgres-turn.ts makes them, with client CPU per turn.
 *   node --cpu-prof --cpu-prof-dir=DIR --import tsx bench/_pg-turn-probe.ts
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { createPostgresStore } from "../src/stores/postgres/index.js";

const URL_ = process.env.THREADKEEP_BENCH_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const TURNS = Number(process.env.TURNS ?? 3000);
const schema = `tk_probe_turn_${randomBytes(4).toString("hex")}`;
const store = createPostgresStore({ url: URL_, schema, poolSize: 1, searchIndexDelayMs: 3_600_000 });
const userId = "bench";
try {
  const { id } = await store.createSession({ id: `turn-${randomBytes(6).toString("hex")}`, userId });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < TURNS; i++) {
    const turn = await store.openTurn!(id, { owner: { userId }, last: 20 });
    await store.appendMessages(id, [{ role: "user", content: `question ${i}` }, { role: "assistant", content: `answer ${i}` }], {
      fence: turn.lease.fence,
      owner: { userId },
      releaseLease: true,
      maxMessages: 200,
      keepUnsummarized: true,
    });
  }
  const cpu = process.cpuUsage(cpu0);
  console.log(`${TURNS} turns: ${(((performance.now() - t0) * 1000) / TURNS).toFixed(0)} µs wall, ${((cpu.user + cpu.system) / TURNS).toFixed(0)} µs client CPU per turn`);
} finally {
  await store.close();
  const admin = postgres(URL_, { max: 1, onnotice: () => {} });
  await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
}
