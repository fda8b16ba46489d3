/**
 * PostgreSQL stores for the store tests, each test file in a schema of its own (files run at once on
 * one server), closed and the schema dropped after the enclosing `describe`'s tests: stores side by
 * side with an admin connection in the schema, or one store behind a TCP proxy that taps its traffic.
 * Stores and clients connect on first use, so a skipped `describe` opens nothing.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { afterAll, beforeAll } from "vitest";
import type { FullStore } from "../../src/core/types.js";
import { createPostgresStore, type PostgresStoreOptions } from "../../src/stores/postgres/index.js";
import { TEST_POSTGRES_URL } from "../_services.js";
import { startTcpProxy, type TcpProxy, type TcpProxyOptions } from "../_tcp-proxy.js";

/** A schema name no other test file uses: `prefix` and 12 random hex digits. */
export const uniqueSchema = (prefix = "tk_test") => `${prefix}_${randomBytes(6).toString("hex")}`;

/** Drops `schemas` and all in them, over a connection of its own. */
export async function dropSchemas(...schemas: string[]): Promise<void> {
  const sql = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {} });
  try {
    for (const schema of schemas) await sql`DROP SCHEMA IF EXISTS ${sql(schema)} CASCADE`;
  } finally {
    await sql.end();
  }
}

/** Options of {@link postgresStoresInSchema}. */
export interface StoresInSchemaOptions extends Omit<PostgresStoreOptions, "url" | "schema"> {
  /** Connections of the admin client. @default 2 */
  adminConnections?: number;
}

/**
 * Two stores of one schema, as two processes sharing it (`store`, `other`), and `admin`, a raw client
 * whose unqualified names resolve in it. The schema is migrated before the first test.
 */
export function postgresStoresInSchema(options: StoresInSchemaOptions = {}): {
  schema: string;
  admin: postgres.Sql;
  store: FullStore;
  other: FullStore;
} {
  const { adminConnections = 2, ...storeOptions } = options;
  const schema = uniqueSchema();
  const admin = postgres(TEST_POSTGRES_URL, {
    onnotice: () => {},
    max: adminConnections,
    connection: { search_path: schema },
  });
  const open = () => createPostgresStore({ poolSize: 4, ...storeOptions, url: TEST_POSTGRES_URL, schema });
  const [store, other] = [open(), open()];
  beforeAll(async () => {
    await store.listAllSessions();
  });
  afterAll(async () => {
    await Promise.all([store.close(), other.close()]);
    await admin.end();
    await dropSchemas(schema);
  });
  return { schema, admin, store, other };
}

/**
 * A store in a schema named after `schemaPrefix`, reached through a TCP proxy on 127.0.0.1 whose
 * `tap` sees every chunk the store sends (to count statements on the wire, see test/_pg-wire.ts).
 */
export function postgresStoreThroughProxy(
  options: { schemaPrefix: string; tap: TcpProxyOptions["tap"] } & Omit<PostgresStoreOptions, "url" | "schema">,
): { readonly store: FullStore } {
  const { schemaPrefix, tap, ...storeOptions } = options;
  const schema = uniqueSchema(schemaPrefix);
  const opened: { store?: FullStore; proxy?: TcpProxy } = {};
  beforeAll(async () => {
    const target = new URL(TEST_POSTGRES_URL);
    opened.proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) }, { tap });
    opened.store = createPostgresStore({ ...storeOptions, url: opened.proxy.url(TEST_POSTGRES_URL), schema });
  });
  afterAll(async () => {
    await opened.store?.close();
    await opened.proxy?.close();
    await dropSchemas(schema);
  });
  return {
    /** The store, opened before the first test. */
    get store() {
      return opened.store!;
    },
  };
}
