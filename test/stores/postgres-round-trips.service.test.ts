/**
 * Round trips of the PostgreSQL store's owner-scoped calls, counted on the wire: a TCP proxy on
 * 127.0.0.1 (test/_tcp-proxy.ts) feeds the protocol messages the client sends to test/_pg-wire.ts, which
 * counts the round trips (each extended query ends with a Sync, a simple query is one Query message). An owner-scoped append, plain or
 * idempotent, is one statement; so is an owner-scoped read. The background drain that indexes appended
 * text for search (`postgres/_indexing.ts`) is on no call's path and is counted apart.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { expectCode } from "../../src/testing/index.js";
import { pgWireCounter } from "../_pg-wire.js";
import { serviceAvailable } from "../_services.js";
import { postgresStoreThroughProxy } from "./_postgres-stores.js";

const enabled = await serviceAvailable("postgres");

describe.skipIf(enabled !== true)("PostgreSQL owner-scoped calls on the wire", () => {
  // The search-index drain runs in the background after appends, on no operation's path.
  const counter = pgWireCounter({ aside: /threadkeep_index_pending/ });
  // One connection, so no statement can hide on another that was opened before counting.
  const pg = postgresStoreThroughProxy({ schemaPrefix: "tk_trips", tap: counter.feed, poolSize: 1 });

  /** Statements `fn` sends, measured on its second run (the first prepares the statements). */
  async function statementsOf(fn: (n: number) => Promise<unknown>): Promise<number> {
    await fn(0);
    const before = counter.roundTrips();
    await fn(1);
    return counter.roundTrips() - before;
  }

  it("appends for the owner in one statement, idempotent or not, and refuses another owner's in one", async () => {
    const userId = `owner-${randomUUID()}`;
    const { id } = await pg.store.createSession({ id: newSessionId(), userId });
    const owner = { userId, activeSince: Date.now() - 60_000 };
    const message = (n: number) => [{ role: "user" as const, content: `m${n}` }];
    expect(await statementsOf((n) => pg.store.appendMessages(id, message(n), { owner }))).toBe(1);
    expect(
      await statementsOf((n) => pg.store.appendMessages(id, message(n), { owner, operationId: `op-${randomUUID()}` })),
    ).toBe(1);
    expect(await statementsOf(() => pg.store.getMessages(id, { last: 20, owner }))).toBe(1);
    const stranger = { userId: `stranger-${randomUUID()}` };
    expect(
      await statementsOf((n) =>
        expectCode(
          pg.store.appendMessages(id, message(n), { owner: stranger, operationId: `op-${n}` }),
          "session_not_found",
        ),
      ),
    ).toBe(1);
    expect(await pg.store.countMessages(id)).toBe(4);
  });
});
