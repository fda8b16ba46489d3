/**
 * Round trips of the PostgreSQL store's owner-scoped calls, counted on the wire: a TCP proxy on
 * 127.0.0.1 (test/_tcp-proxy.ts) feeds the protocol messages the client sends to test/_pg-wire.ts, which
 * counts the round trips (each extended query ends with a Sync, a simple query is one Query message). An owner-scoped append, plain or
 * idempotent, is one statement; so is an owner-scoped read. The background drain that indexes appended
 * text for search (`postgres/_indexing.ts`) is on no call's path and is counted apart.
 */
import { randomBytes, randomUUID } from "node:crypto";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { SessionStore } from "../../src/core/types.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { expectCode } from "../../src/testing/index.js";
import { pgWireCounter } from "../_pg-wire.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { startTcpProxy, type TcpProxy } from "../_tcp-proxy.js";

const enabled = await serviceAvailable("postgres");
const schema = `tk_trips_${randomBytes(6).toString("hex")}`;

describe.skipIf(enabled !== true)("PostgreSQL owner-scoped calls on the wire", () => {
  // The search-index drain runs in the background after appends, on no operation's path.
  const counter = pgWireCounter({ aside: /threadkeep_index_pending/ });
  let proxy: TcpProxy;
  let store: SessionStore;
  beforeAll(async () => {
    const target = new URL(TEST_POSTGRES_URL);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) }, { tap: counter.feed });
    // One connection, so no statement can hide on another that was opened before counting.
    store = createPostgresStore({ url: proxy.url(TEST_POSTGRES_URL), schema, poolSize: 1 });
  });
  afterAll(async () => {
    await store?.close();
    await proxy?.close();
    const sql = postgres(TEST_POSTGRES_URL, { onnotice: () => {} });
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await sql.end();
  });

  /** Statements `fn` sends, measured on its second run (the first prepares the statements). */
  async function statementsOf(fn: (n: number) => Promise<unknown>): Promise<number> {
    await fn(0);
    const before = counter.roundTrips();
    await fn(1);
    return counter.roundTrips() - before;
  }

  it("appends for the owner in one statement, idempotent or not, and refuses another owner's in one", async () => {
    const userId = `owner-${randomUUID()}`;
    const { id } = await store.createSession({ id: newSessionId(), userId });
    const owner = { userId, activeSince: Date.now() - 60_000 };
    const message = (n: number) => [{ role: "user" as const, content: `m${n}` }];
    expect(await statementsOf((n) => store.appendMessages(id, message(n), { owner }))).toBe(1);
    expect(await statementsOf((n) => store.appendMessages(id, message(n), { owner, operationId: `op-${randomUUID()}` }))).toBe(1);
    expect(await statementsOf(() => store.getMessages(id, { last: 20, owner }))).toBe(1);
    const stranger = { userId: `stranger-${randomUUID()}` };
    expect(
      await statementsOf((n) => expectCode(store.appendMessages(id, message(n), { owner: stranger, operationId: `op-${n}` }), "session_not_found")),
    ).toBe(1);
    expect(await store.countMessages(id)).toBe(4);
  });
});
