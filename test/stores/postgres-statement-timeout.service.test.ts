/**
 * A statement the server stops (statement_timeout, a lock wait) is not an outage: the server
 * answered. Only a server that cannot be reached marks the PostgreSQL store down, so the operations
 * that follow a timed-out one get their whole query timeout, and none is refused at once.
 */
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { isThreadkeepError } from "../../src/core/errors.js";
import { newSessionId } from "../../src/core/ids.js";
import type { FullStore } from "../../src/core/types.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";

const enabled = await serviceAvailable("postgres");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(enabled !== true)("postgres: a statement timeout is not an outage", () => {
  const raw = postgres(TEST_POSTGRES_URL, { max: 4, onnotice: () => {} });
  const stores: FullStore[] = [];
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await raw.end();
  });

  /** Holds the row of session `id` locked in a transaction of its own until `release()`. */
  async function lock(id: string): Promise<{ release: () => Promise<void> }> {
    let release!: () => void;
    let locked!: () => void;
    const holding = new Promise<void>((r) => (locked = r));
    const tx = raw.begin(async (sql) => {
      await sql`SELECT id FROM sessions WHERE id = ${id} FOR UPDATE`;
      locked();
      await new Promise<void>((r) => (release = r));
    });
    await holding;
    return { release: async () => (release(), await tx) };
  }

  it("does not refuse operations after statements that ran out of time while the pool was busy", async () => {
    // One connection, so the second statement waits behind the first and misses its deadline while
    // the server is still running it; a connect timeout far below the query timeout, so an outage
    // would begin refusing at once.
    const store = createPostgresStore({
      url: TEST_POSTGRES_URL,
      poolSize: 1,
      queryTimeoutMs: 1_000,
      connectTimeoutSeconds: 0.2,
    });
    stores.push(store);
    for (
      let tries = 0;
      !(await store.getSession(newSessionId()).then(
        () => true,
        () => false,
      ));
      tries++
    ) {
      if (tries === 8) throw new Error("the store did not open");
      await sleep(400);
    }
    const stuck = await store.createSession({ id: newSessionId(), userId: "stuck" });
    const other = await store.createSession({ id: newSessionId(), userId: "other" });
    const stuckLock = await lock(stuck.id);
    try {
      const waits = () => store.appendMessages(stuck.id, [{ role: "user", content: "waits" }]).catch((e) => e);
      const errors = await Promise.all([waits(), waits()]);
      for (const error of errors) expect(isThreadkeepError(error, "store_unavailable"), String(error)).toBe(true);
      await sleep(400);
      // The second append still holds the one connection for a while: this read waits for it.
      await expect(store.getSession(other.id)).resolves.toMatchObject({ id: other.id });
      for (let i = 0; i < 10; i++) await expect(store.getSession(other.id)).resolves.toMatchObject({ id: other.id });
    } finally {
      await stuckLock.release();
    }
  }, 30_000);
  it("survives a statement timeout too short for a new connection's first statement (no unhandled rejection)", async () => {
    // The driver's own lookup of array types, which it used to run first on every connection, was cut by
    // a 1 ms statement_timeout and rejected a promise nobody held: Node ends a process on that.
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", record);
    try {
      const store = createPostgresStore({ url: TEST_POSTGRES_URL, poolSize: 3, queryTimeoutMs: 1 });
      stores.push(store);
      const id = newSessionId();
      // Ten operations at once open every connection of the pool; each may time out (1 ms), none may crash.
      const outcomes = await Promise.all(
        Array.from({ length: 10 }, () =>
          store.getSession(id).then(
            () => "ok",
            (e: unknown) => (isThreadkeepError(e) ? e.code : String(e)),
          ),
        ),
      );
      for (const outcome of outcomes) expect(["ok", "store_unavailable", "store_timeout"]).toContain(outcome);
      await sleep(300);
      expect(unhandled.map(String)).toEqual([]);
    } finally {
      process.off("unhandledRejection", record);
    }
  });
});
