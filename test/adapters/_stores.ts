/**
 * The five stores the adapter conformance suites run on: memory, file (a temp dir), SQLite (a temp
 * file), PostgreSQL (a schema of its own) and Redis (a key prefix of its own), on the real servers.
 * One `Memory` per store per test file, opened before its tests and closed (and cleaned up) after;
 * tests use random session ids, so they share it. Outside CI a missing server skips its suite with
 * the reason in the suite's name; under CI=true it fails (see test/_services.ts).
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import type { Memory } from "../../src/core/memory/memory.js";
import { createMemory } from "../../src/create-memory.js";
import type { FullStore } from "../../src/core/types.js";
import { createFileStore } from "../../src/stores/file/index.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { createRedisStore } from "../../src/stores/redis/index.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { serviceAvailable, TEST_POSTGRES_URL, TEST_REDIS_URL } from "../_services.js";
import { dropSchemas, uniqueSchema } from "../stores/_postgres-stores.js";

/** One store of the adapter suites: its name, and why it is skipped when its server is absent. */
export interface AdapterStore {
  name: "memory" | "file" | "sqlite" | "postgres" | "redis";
  /** Set when the store's server is not reachable (outside CI only). */
  skipped?: string;
  /** `name`, with the reason when skipped: what `describe.each` prints. */
  label: string;
}

const reasons = { postgres: await serviceAvailable("postgres"), redis: await serviceAvailable("redis") };

/** Every store, in the order the suites run them. */
export const ADAPTER_STORES: AdapterStore[] = (["memory", "file", "sqlite", "postgres", "redis"] as const).map(
  (name) => {
    const reason = name === "postgres" || name === "redis" ? reasons[name] : true;
    if (reason === true) return { name, label: name };
    console.warn(`[adapters] skipping the ${name} store: ${reason}`);
    return { name, skipped: reason, label: `${name}, skipped: ${reason}` };
  },
);

interface Opened {
  store: FullStore;
  cleanup: () => Promise<void>;
}

function open(name: AdapterStore["name"]): Opened {
  switch (name) {
    case "memory":
      return { store: createMemoryStore(), cleanup: async () => {} };
    case "file":
    case "sqlite": {
      const dir = mkdtempSync(join(tmpdir(), `tk-adapters-${name}-`));
      const store =
        name === "file" ? createFileStore({ dir }) : createSqliteStore({ path: join(dir, "threadkeep.db") });
      return { store, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
    }
    case "postgres": {
      const schema = uniqueSchema("tk_adapters");
      return {
        store: createPostgresStore({ url: TEST_POSTGRES_URL, schema, poolSize: 4 }),
        cleanup: () => dropSchemas(schema),
      };
    }
    case "redis": {
      const keyPrefix = `tk-adapters-${randomUUID()}:`;
      const store = createRedisStore({ url: TEST_REDIS_URL, keyPrefix });
      return { store, cleanup: () => deleteRedisKeys(keyPrefix) };
    }
  }
}

async function deleteRedisKeys(prefix: string): Promise<void> {
  const { createClient } = await import("redis");
  const client = createClient({ url: TEST_REDIS_URL });
  await client.connect();
  try {
    for await (const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 }))
      if (keys.length) await client.del(keys);
  } finally {
    client.destroy();
  }
}

/**
 * A `Memory` over `store`, opened before the enclosing suite's tests and closed, with its data
 * removed, after them.
 */
export function useStoreMemory(store: AdapterStore): { readonly memory: Memory } {
  const ctx = {} as { memory: Memory; opened: Opened };
  beforeAll(() => {
    ctx.opened = open(store.name);
    ctx.memory = createMemory({ store: ctx.opened.store });
  });
  afterAll(async () => {
    await ctx.memory?.close();
    await ctx.opened?.cleanup();
  });
  return ctx;
}
