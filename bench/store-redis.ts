/**
 * Redis store benchmark: p50/p99 of "load last 20" and "append 1" through the store, next to a raw
 * node-redis baseline measured in the same run on the same data (one LRANGE of 20 on a plain list of
 * the same JSON messages; one RPUSH), over the same client package and protocol (RESP2).
 *
 * `BENCH_QUICK=1` shrinks the data. `THREADKEEP_BENCH_REDIS_URL` (else `THREADKEEP_TEST_REDIS_URL`,
 * else redis://127.0.0.1:6379) names the server; an unreachable server skips with a printed reason.
 * Everything is written under a random key prefix and removed afterwards (no FLUSHDB: shared server).
 */
import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import { createRedisStore } from "../src/stores/redis/index.js";
import { collectGarbage, elapsedMs } from "./_harness.js";
import {
  loadStore,
  measureSubjects,
  printNetworkStoreReport,
  SCALES,
  type Scale,
  type StoreResult,
  type Subject,
  storeSubject,
  totalMessages,
} from "./_store-bench.js";
import { messageOf, sessionIdOf } from "./_store-data.js";

const URL_ =
  process.env.THREADKEEP_BENCH_REDIS_URL ?? process.env.THREADKEEP_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
/** Sessions loaded at once: loading is not what is measured, only how long a run takes. */
const LOAD_CONCURRENCY = 32;
const STORE = "redis";
const RAW = "raw node-redis (LRANGE -20 -1; RPUSH)";
const prefix = `threadkeep-bench-${randomUUID()}:`;

type Raw = ReturnType<typeof createClient>;

async function removePrefix(raw: Raw): Promise<void> {
  for await (const keys of raw.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 })) {
    if (keys.length > 0) await raw.unlink(keys);
  }
}

/** The baseline's data: one plain list per session holding the same JSON the store keeps. */
async function loadRaw(raw: Raw, scale: Scale): Promise<Subject> {
  const key = (id: string) => `${prefix}raw:${scale.label}:${id}`;
  const started = performance.now();
  let next = 0;
  const worker = async () => {
    for (let s = next++; s < scale.sessions; s = next++) {
      const bodies = Array.from({ length: scale.messagesPerSession }, (_, m) => JSON.stringify(messageOf(s, m)));
      await raw.rPush(key(sessionIdOf(s)), bodies);
    }
  };
  await Promise.all(Array.from({ length: LOAD_CONCURRENCY }, worker));
  console.log(`  raw: loaded ${totalMessages(scale).toLocaleString("en")} messages in ${elapsedMs(started)}`);
  return {
    name: RAW,
    last20: (id) => raw.lRange(key(id), -20, -1),
    append1: (id, message) => raw.rPush(key(id), JSON.stringify(message)),
  };
}

async function main(): Promise<void> {
  const raw: Raw = createClient({
    url: URL_,
    RESP: 2,
    socket: { reconnectStrategy: false, connectTimeout: 2000 },
  });
  raw.on("error", () => {});
  try {
    await raw.connect();
  } catch (error) {
    console.log(`redis benchmark skipped: ${URL_} is not reachable (${(error as Error).message})`);
    return;
  }
  const results: StoreResult[] = [];
  try {
    for (const scale of SCALES) {
      console.log(
        `# ${scale.label} messages: ${scale.sessions.toLocaleString("en")} sessions × ${scale.messagesPerSession}`,
      );
      const store = createRedisStore({ url: URL_, keyPrefix: `${prefix}store:${scale.label}:`, ttlMs: 0 });
      try {
        const baseline = await loadRaw(raw, scale);
        await loadStore(store, scale, STORE, LOAD_CONCURRENCY);
        results.push(...(await measureSubjects(scale, [baseline, storeSubject(store, STORE)])));
      } finally {
        await store.close();
        await removePrefix(raw);
        collectGarbage();
      }
    }
  } finally {
    await removePrefix(raw);
    await raw.close();
  }
  printNetworkStoreReport("Redis store", results, STORE, RAW);
}

await main();
