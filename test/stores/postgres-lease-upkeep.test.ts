/**
 * Where the PostgreSQL lease's upkeep goes on the wire: the heartbeat that keeps a waiter's ticket
 * alive is on no caller's path, so it runs on the spill pool, never on the main connection (see
 * `postgres/_client.ts`), where a sequential caller's next operation would queue behind it. A TCP
 * proxy feeds every statement, with the connection it went to, to test/_pg-wire.ts.
 */
import { randomBytes } from "node:crypto";
import type { Socket } from "node:net";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { SessionStore } from "../../src/core/types.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { pgWireCounter } from "../_pg-wire.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { startTcpProxy, type TcpProxy } from "../_tcp-proxy.js";

const enabled = await serviceAvailable("postgres");
const schema = `tk_upkeep_${randomBytes(6).toString("hex")}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(enabled !== true)("PostgreSQL lease upkeep on the wire", () => {
  /** The first connection to send a statement: the store's main one (it runs the migration). */
  let main: Socket | null = null;
  const beats: Socket[] = [];
  const counter = pgWireCounter({
    onStatement: (connection, sql) => {
      main ??= connection;
      // The heartbeat alone starts with this UPDATE (an attempt to take the lease beats in a CTE).
      if (/^\s*UPDATE lease_queue SET alive_until/.test(sql)) beats.push(connection);
    },
  });
  let proxy: TcpProxy;
  let store: SessionStore;
  beforeAll(async () => {
    const target = new URL(TEST_POSTGRES_URL);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) }, { tap: counter.feed });
    store = createPostgresStore({ url: proxy.url(TEST_POSTGRES_URL), schema, poolSize: 4 });
  });
  afterAll(async () => {
    await store?.close();
    await proxy?.close();
    const sql = postgres(TEST_POSTGRES_URL, { onnotice: () => {} });
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await sql.end();
  });

  it("beats a waiter's ticket on the spill pool, not on the main connection", { timeout: 20_000 }, async () => {
    const id = newSessionId();
    await store.createSession({ id, userId: "upkeep" });
    const holder = await store.acquireLease(id, { ttlMs: 10_000 });
    const waiting = store.acquireLease(id, { waitMs: 10_000 });
    // Past two heartbeats (one a second) while the waiter holds a ticket.
    await sleep(2_300);
    await holder.release();
    await (await waiting).release();

    expect(main).not.toBeNull();
    expect(beats.length).toBeGreaterThan(0);
    expect(beats.filter((connection) => connection === main)).toHaveLength(0);
  });
});
