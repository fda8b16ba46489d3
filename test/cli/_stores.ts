/**
 * The five stores, each opened on its own empty space (a temp dir, a fresh PostgreSQL schema, a
 * fresh Redis key prefix), so `--all` exports and migrations see only what a test put there even
 * while other suites share the servers.
 */

import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FullStore } from "../../src/core/types.js";
import { serviceAvailable, TEST_POSTGRES_URL, TEST_REDIS_URL } from "../_services.js";

/** One backend a test can open empty stores of. */
export interface StoreKind {
  name: "memory" | "file" | "sqlite" | "postgres" | "redis";
  /** True, or why it is skipped. */
  enabled: true | string;
  /** A new, empty store. */
  open(): Promise<FullStore>;
  /** Removes what `open` made (temp dirs, schemas, keys). */
  cleanup(): Promise<void>;
}

/** Temp directories made by tests of this process, removed by `cleanup`. */
function tempDirs() {
  const dirs: string[] = [];
  return {
    make: (prefix: string) => {
      const dir = mkdtempSync(join(tmpdir(), prefix));
      dirs.push(dir);
      return dir;
    },
    remove: async () => {
      for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The five backends with their availability. */
export async function storeKinds(): Promise<StoreKind[]> {
  const pg = await serviceAvailable("postgres");
  const redis = await serviceAvailable("redis");
  const dirs = tempDirs();
  const schemas: string[] = [];
  const prefixes: string[] = [];
  return [
    {
      name: "memory",
      enabled: true,
      open: async () => (await import("../../src/stores/in-process/index.js")).createMemoryStore({ ttlMs: 0 }),
      cleanup: async () => {},
    },
    {
      name: "file",
      enabled: true,
      open: async () =>
        (await import("../../src/stores/file/index.js")).createFileStore({ dir: dirs.make("tk-cli-file-") }),
      cleanup: dirs.remove,
    },
    {
      name: "sqlite",
      enabled: true,
      open: async () =>
        (await import("../../src/stores/sqlite/index.js")).createSqliteStore({
          path: join(dirs.make("tk-cli-sqlite-"), "t.db"),
        }),
      cleanup: dirs.remove,
    },
    {
      name: "postgres",
      enabled: pg,
      open: async () => {
        const schema = `tk_cli_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
        schemas.push(schema);
        return (await import("../../src/stores/postgres/index.js")).createPostgresStore({
          url: TEST_POSTGRES_URL,
          schema,
        });
      },
      cleanup: async () => {
        if (schemas.length === 0) return;
        const { default: postgres } = await import("postgres");
        const sql = postgres(TEST_POSTGRES_URL, { onnotice: () => {} });
        for (const schema of schemas.splice(0)) await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await sql.end();
      },
    },
    {
      name: "redis",
      enabled: redis,
      open: async () => {
        const keyPrefix = `tk-cli-${randomUUID().slice(0, 8)}:`;
        prefixes.push(keyPrefix);
        return (await import("../../src/stores/redis/index.js")).createRedisStore({
          url: TEST_REDIS_URL,
          keyPrefix,
        });
      },
      cleanup: async () => {
        if (prefixes.length === 0) return;
        const { createClient } = await import("redis");
        const client = createClient({ url: TEST_REDIS_URL });
        await client.connect();
        for (const prefix of prefixes.splice(0)) {
          for await (const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 })) {
            if (keys.length > 0) await client.unlink(keys);
          }
        }
        await client.quit();
      },
    },
  ];
}
