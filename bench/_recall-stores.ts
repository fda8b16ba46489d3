/**
 * The stores the recall benchmark fills, each opened on a place of its own (a temporary directory,
 * a random PostgreSQL schema, a random Redis key prefix) and removed again afterwards, since a
 * million messages left behind would weigh on a shared server. `BENCH_RECALL_STORES=sqlite,redis`
 * picks some; unreachable services are skipped with a printed reason.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VectorStore } from "../src/core/types.js";
import { createFileStore } from "../src/stores/file/index.js";
import { createMemoryStore } from "../src/stores/in-process/index.js";
import { createSqliteStore } from "../src/stores/sqlite/index.js";
import { TEST_POSTGRES_URL, TEST_REDIS_URL, serviceAvailable } from "../test/_services.js";

/** A store under test and how to remove what it wrote. */
export interface BenchStore {
  name: string;
  store: VectorStore;
  /** Sessions loaded at once (a network store overlaps round trips; an embedded one gains nothing). */
  concurrency: number;
  /** Runs after the build, before measuring (e.g. PostgreSQL's ANALYZE). */
  settle?: () => Promise<void>;
  /** Closes the store and deletes its data. */
  remove(): Promise<void>;
}

type Opener = () => Promise<BenchStore | string>;

const openers: Record<string, Opener> = {
  async memory() {
    const store = createMemoryStore({ maxSessions: 10_000_000, ttlMs: 0 });
    return { name: "memory", store, concurrency: 1, remove: () => store.close() };
  },
  async file() {
    const dir = mkdtempSync(join(tmpdir(), "tk-recall-file-"));
    const store = createFileStore({ dir });
    return {
      name: "file",
      store,
      concurrency: 4,
      remove: async () => (await store.close(), rmSync(dir, { recursive: true, force: true })),
    };
  },
  async sqlite() {
    const dir = mkdtempSync(join(tmpdir(), "tk-recall-sqlite-"));
    const store = createSqliteStore({ path: join(dir, "bench.db") });
    return {
      name: "sqlite",
      store,
      concurrency: 1,
      remove: async () => (await store.close(), rmSync(dir, { recursive: true, force: true })),
    };
  },
  async postgres() {
    const available = await serviceAvailable("postgres");
    if (available !== true) return available;
    const { createPostgresStore } = await import("../src/stores/postgres/index.js");
    const { default: postgres } = await import("postgres");
    const schema = `tk_recall_${randomBytes(4).toString("hex")}`;
    const store = createPostgresStore({ url: TEST_POSTGRES_URL, schema });
    const admin = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {} });
    return {
      name: "postgres",
      store,
      concurrency: 8,
      // The database as autovacuum leaves it once it settles (statistics, the full-text index's pending
      // list merged, visibility set), rather than measured while autovacuum does that work.
      settle: async () =>
        void (await admin.unsafe(
          `VACUUM (ANALYZE) "${schema}".sessions, "${schema}".messages, "${schema}".message_vectors`,
        )),
      remove: async () => {
        await store.close();
        await admin.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
        await admin.end();
      },
    };
  },
  async redis() {
    const available = await serviceAvailable("redis");
    if (available !== true) return available;
    const { createRedisStore } = await import("../src/stores/redis/index.js");
    const { createClient } = await import("redis");
    const keyPrefix = `tkrecall${randomBytes(4).toString("hex")}:`;
    const store = createRedisStore({ url: TEST_REDIS_URL, keyPrefix, ttlMs: 0 });
    return {
      name: "redis",
      store,
      concurrency: 16,
      remove: async () => {
        await store.close();
        const raw = createClient({ url: TEST_REDIS_URL });
        await raw.connect();
        for await (const keys of raw.scanIterator({ MATCH: `${keyPrefix}*`, COUNT: 1000 }))
          if (keys.length > 0) await raw.unlink(keys);
        await raw.quit();
      },
    };
  },
};

/** The store names to measure: `BENCH_RECALL_STORES`, else all. */
export function benchStoreNames(): string[] {
  const wanted = process.env.BENCH_RECALL_STORES?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  return wanted && wanted.length > 0 ? wanted.filter((n) => n in openers) : Object.keys(openers);
}

/** Opens a store by name; a string is why it was skipped. */
export async function openBenchStore(name: string): Promise<BenchStore | string> {
  return openers[name]();
}
