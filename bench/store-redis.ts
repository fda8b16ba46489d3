/**
 * Redis store benchmark: p50/p99 of "load last 20" and "append 1" through the store, next to a raw
 * node-redis baseline measured in the same run on the same data (one LRANGE of 20 on a plain list of
 * JSON messages; one RPUSH), over the same client package and protocol.
 *
 * `BENCH_QUICK=1` shrinks the data. `THREADKEEP_BENCH_REDIS_URL` (else `THREADKEEP_TEST_REDIS_URL`,
 * else redis://127.0.0.1:6379) names the server; an unreachable server skips with a printed reason.
 * Everything is written under a random key prefix and removed afterwards (no FLUSHDB: shared server).
 */
import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import type { MessageInput, SessionStore } from "../src/core/types.js";
import { createRedisStore } from "../src/stores/redis.js";
import {
  collectGarbage,
  elapsedMs,
  formatMicros,
  formatRatio,
  type Measurement,
  measure,
  printTable,
  QUICK,
  seededRandom,
} from "./_harness.js";
import { messageOf, sessionIdOf } from "./_store-data.js";

interface Scale {
  label: string;
  sessions: number;
  messagesPerSession: number;
}

interface Result {
  subject: string;
  scale: Scale;
  last20: Measurement;
  append1: Measurement;
}

const URL_ =
  process.env.THREADKEEP_BENCH_REDIS_URL ?? process.env.THREADKEEP_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const SCALES: Scale[] = QUICK
  ? [
      { label: "5K", sessions: 250, messagesPerSession: 20 },
      { label: "100K", sessions: 1_000, messagesPerSession: 100 },
    ]
  : [
      { label: "40K", sessions: 2_000, messagesPerSession: 20 },
      { label: "1M", sessions: 10_000, messagesPerSession: 100 },
    ];
const READS = QUICK ? 2_000 : 10_000;
const APPENDS = QUICK ? 500 : 2_000;
/** Sessions loaded at once: loading is not what is measured, only how long a run takes. */
const LOAD_CONCURRENCY = 32;
/** What `Memory` passes on every commit by default. */
const MAX_MESSAGES = 200;
const STORE = "redis";
const RAW = "raw node-redis LRANGE";
const prefix = `threadkeep-bench-${randomUUID()}:`;
const total = (scale: Scale) => scale.sessions * scale.messagesPerSession;

type Raw = ReturnType<typeof createClient>;

async function inParallel(count: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < count; i = next++) await fn(i);
  };
  await Promise.all(Array.from({ length: LOAD_CONCURRENCY }, worker));
}

async function removePrefix(raw: Raw): Promise<void> {
  for await (const keys of raw.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 })) {
    if (keys.length > 0) await raw.unlink(keys);
  }
}

/** Reads and appends at random sessions, in the same order for the store and the baseline. */
async function measureOps(
  scale: Scale,
  last20: (id: string) => Promise<unknown>,
  append1: (id: string, message: MessageInput) => Promise<unknown>,
): Promise<Pick<Result, "last20" | "append1">> {
  const ids = Array.from({ length: scale.sessions }, (_, s) => sessionIdOf(s));
  const readRandom = seededRandom(1);
  const read = await measure("load last 20", () => last20(ids[Math.floor(readRandom() * ids.length)]), READS);
  const appendRandom = seededRandom(2);
  const append = await measure(
    "append 1",
    (i) => append1(ids[Math.floor(appendRandom() * ids.length)], messageOf(i, 1_000_000 + i)),
    APPENDS,
  );
  return { last20: read, append1: append };
}

async function runRaw(raw: Raw, scale: Scale): Promise<Result> {
  const key = (id: string) => `${prefix}raw:${scale.label}:${id}`;
  const started = performance.now();
  await inParallel(scale.sessions, (s) =>
    raw.rPush(
      key(sessionIdOf(s)),
      Array.from({ length: scale.messagesPerSession }, (_, m) => JSON.stringify(messageOf(s, m))),
    ),
  );
  console.log(`  raw: loaded ${total(scale).toLocaleString("en")} messages in ${elapsedMs(started)}`);
  const ops = await measureOps(
    scale,
    (id) => raw.lRange(key(id), -20, -1),
    (id, message) => raw.rPush(key(id), JSON.stringify(message)),
  );
  return { subject: RAW, scale, ...ops };
}

async function runStore(store: SessionStore, scale: Scale): Promise<Result> {
  const started = performance.now();
  await inParallel(scale.sessions, async (s) => {
    const id = sessionIdOf(s);
    await store.createSession({ id, userId: `user-${s % 500}` });
    await store.appendMessages(
      id,
      Array.from({ length: scale.messagesPerSession }, (_, m) => messageOf(s, m)),
    );
  });
  console.log(`  ${STORE}: loaded ${total(scale).toLocaleString("en")} messages in ${elapsedMs(started)}`);
  const ops = await measureOps(
    scale,
    (id) => store.getMessages(id, { last: 20 }),
    (id, message) => store.appendMessages(id, [message], { maxMessages: MAX_MESSAGES }),
  );
  return { subject: STORE, scale, ...ops };
}

function report(results: Result[]): void {
  const rawOf = (scale: Scale) => results.find((r) => r.subject === RAW && r.scale === scale)!;
  printTable(
    ["store", "messages", "last 20 p50", "last 20 p99", "append 1 p50", "append 1 p99", "last 20 p50 / raw"],
    results.map((r) => [
      r.subject,
      r.scale.label,
      formatMicros(r.last20.p50),
      formatMicros(r.last20.p99),
      formatMicros(r.append1.p50),
      formatMicros(r.append1.p99),
      formatRatio(r.last20.p50 / rawOf(r.scale).last20.p50),
    ]),
  );
  console.log();
  for (const r of results.filter((x) => x.subject === STORE)) {
    const ratio = r.last20.p50 / rawOf(r.scale).last20.p50;
    const p99 = r.last20.p99;
    console.log(
      `redis "load last 20" at ${r.scale.label}: ${formatRatio(ratio)} raw (target ≤ 2×: ${ratio <= 2 ? "met" : "MISSED"}), ` +
        `p99 ${formatMicros(p99)} (target < 2 ms: ${p99 < 2000 ? "met" : "MISSED"})`,
    );
  }
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
  const results: Result[] = [];
  try {
    for (const scale of SCALES) {
      console.log(
        `# ${scale.label} messages: ${scale.sessions.toLocaleString("en")} sessions × ${scale.messagesPerSession}`,
      );
      results.push(await runRaw(raw, scale));
      const store = createRedisStore({ url: URL_, keyPrefix: `${prefix}store:${scale.label}:`, ttlMs: 0 });
      try {
        results.push(await runStore(store, scale));
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
  console.log(
    `\n## Redis store (${READS.toLocaleString("en")} reads, ${APPENDS.toLocaleString("en")} appends each, random sessions)\n`,
  );
  report(results);
}

await main();
