/**
 * Where the PostgreSQL lease's upkeep goes on the wire: the heartbeat that keeps a waiter's ticket
 * alive is on no caller's path, so it runs on the spill pool, never on the main connection (see
 * `postgres/_client.ts`), where a sequential caller's next operation would queue behind it. A TCP
 * proxy feeds every statement, with the connection it went to, to test/_pg-wire.ts.
 */
import type { Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { pgWireCounter } from "../_pg-wire.js";
import { serviceAvailable } from "../_services.js";
import { postgresStoreThroughProxy } from "./_postgres-stores.js";

const enabled = await serviceAvailable("postgres");
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
  const pg = postgresStoreThroughProxy({ schemaPrefix: "tk_upkeep", tap: counter.feed, poolSize: 4 });

  it("beats a waiter's ticket on the spill pool, not on the main connection", { timeout: 20_000 }, async () => {
    const id = newSessionId();
    await pg.store.createSession({ id, userId: "upkeep" });
    const holder = await pg.store.acquireLease(id, { ttlMs: 10_000 });
    const waiting = pg.store.acquireLease(id, { waitMs: 10_000 });
    // Past two heartbeats (one a second) while the waiter holds a ticket.
    await sleep(2_300);
    await holder.release();
    await (await waiting).release();

    expect(main).not.toBeNull();
    expect(beats.length).toBeGreaterThan(0);
    expect(beats.filter((connection) => connection === main)).toHaveLength(0);
  });
});
