/**
 * Redis in the proxy benchmark (bench/proxy.ts): the store its server child serves (under the run's
 * own key prefix, optionally "call by call"), and the paired comparison of a turn in two round trips
 * against call by call.
 */
import type { ChildProcess } from "node:child_process";
import type { FullStore } from "../src/core/types.js";
import { formatMicros, percentile, QUICK } from "./_harness.js";

/**
 * A Redis store under the bench's own key prefix (`BENCH_REDIS_PREFIX`, removed afterwards); with
 * `BENCH_CALL_BY_CALL=1` its `combinedTurn` is hidden, so a turn runs call by call. Other URLs as given.
 */
export async function redisStore(url: string): Promise<FullStore | string> {
  if (!/^redis(\+cluster)?:/.test(url)) return url;
  const { createRedisStore } = await import("../src/stores/redis/index.js");
  const store = createRedisStore({ url, keyPrefix: process.env.BENCH_REDIS_PREFIX });
  if (process.env.BENCH_CALL_BY_CALL !== "1") return store;
  return { ...store, capabilities: { ...store.capabilities, combinedTurn: false } };
}

/** Deletes the keys of a bench run's Redis prefix. */
export async function dropRedisPrefix(url: string, prefix: string): Promise<void> {
  const { createClient } = await import("redis");
  const client = createClient({ url });
  await client.connect();
  for await (const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 }))
    if (keys.length > 0) await client.del(keys);
  await client.close();
}

/** The Redis URL of the tests, or null (and why, printed) when Redis is not reachable. */
export async function redisUrl(): Promise<string | null> {
  const { serviceAvailable, TEST_REDIS_URL } = await import("../test/_services.js");
  const available = await serviceAvailable("redis").catch((error: Error) => error.message);
  if (available === true) return TEST_REDIS_URL;
  console.log(`redis: skipped, ${available}`);
  return null;
}

/** What the paired comparison needs of bench/proxy.ts. */
export interface ProxyDriver {
  startRole(role: string, env: Record<string, string>): Promise<{ child: ChildProcess; url: string }>;
  /** p50 latency in µs of `total` turns of one session, one after another. */
  p50(base: string, total: number, withSession: boolean): Promise<number>;
  warmupTurns: number;
}

/** Rounds of the paired Redis comparison, and turns per configuration per round. */
const PAIRED_ROUNDS = QUICK ? 15 : 30;
const PAIRED_TURNS = QUICK ? 100 : 200;

/** Medians over the rounds of the paired comparison (µs), and of the per-round ratio. */
export interface Paired {
  addedByCall: number;
  addedCombined: number;
  ratio: number;
}

/**
 * Redis in two round trips against call by call, at 1 session, measured in alternating rounds (direct,
 * call by call, two round trips; `PAIRED_TURNS` turns each) with both servers up: on a shared machine
 * the load drifts between the rows of the table above, so the comparison is made round by round.
 */
export async function pairedRedis(
  driver: ProxyDriver,
  upstream: string,
  redis: string,
  prefix: string,
): Promise<Paired> {
  const { startRole } = driver;
  const env = { BENCH_STORE: redis, BENCH_UPSTREAM: upstream, BENCH_WORKERS: "1", BENCH_REDIS_PREFIX: prefix };
  const byCall = await startRole("server", { ...env, BENCH_CALL_BY_CALL: "1" });
  const combined = await startRole("server", env).catch((error) => {
    byCall.child.kill("SIGTERM");
    throw error;
  });
  try {
    await driver.p50(byCall.url, driver.warmupTurns, true);
    await driver.p50(combined.url, driver.warmupTurns, true);
    const rounds: { byCall: number; combined: number }[] = [];
    for (let i = 0; i < PAIRED_ROUNDS; i++) {
      const direct = await driver.p50(upstream, PAIRED_TURNS, false);
      const a = (await driver.p50(byCall.url, PAIRED_TURNS, true)) - direct;
      const b = (await driver.p50(combined.url, PAIRED_TURNS, true)) - direct;
      rounds.push({ byCall: a, combined: b });
    }
    const median = (values: number[]) =>
      percentile(
        [...values].sort((x, y) => x - y),
        50,
      );
    return {
      addedByCall: median(rounds.map((r) => r.byCall)),
      addedCombined: median(rounds.map((r) => r.combined)),
      ratio: median(rounds.map((r) => r.combined / r.byCall)),
    };
  } finally {
    byCall.child.kill("SIGTERM");
    combined.child.kill("SIGTERM");
  }
}

/** The paired comparison's line of the report. */
export function pairedLine(paired: Paired): string {
  return (
    `redis added latency p50 at 1 session, ${PAIRED_ROUNDS} alternating rounds of ${PAIRED_TURNS} turns (medians): ` +
    `${formatMicros(paired.addedCombined)} in two round trips, ${formatMicros(paired.addedByCall)} call by call ` +
    `(per-round ratio ${paired.ratio.toFixed(2)}×)`
  );
}
