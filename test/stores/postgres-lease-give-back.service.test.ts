/**
 * A PostgreSQL grant whose answer is lost: the statement that grants a waiter the turn lease commits,
 * then the connection goes silent before the answer arrives (a proxy between the store and the
 * server stalls right after the grant is sent). The waiter fails with `store_unavailable`, so nobody
 * holds that lease; once the server is reachable again the store gives it back, and the next turn
 * does not wait for its lapse.
 */
import { newSessionId } from "../../src/core/ids.js";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isThreadkeepError } from "../../src/core/errors.js";
import type { FullStore } from "../../src/core/types.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { startTcpProxy, type TcpProxy } from "../_tcp-proxy.js";

const enabled = await serviceAvailable("postgres");
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(enabled !== true)("postgres: a grant whose answer was lost", () => {
  let proxy: TcpProxy;
  let proxied: FullStore;
  let direct: FullStore;
  let raw: postgres.Sql;
  /** The session whose next statement through the proxy is followed by a stall. */
  let armed: string | null = null;
  /** Statements of the armed session to let through before the stall. */
  let skip = 0;

  beforeAll(async () => {
    const target = new URL(TEST_POSTGRES_URL);
    proxy = await startTcpProxy(
      { host: target.hostname, port: Number(target.port || 5432) },
      {
        tap: (_connection, chunk) => {
          if (armed === null || !chunk.includes(armed)) return;
          if (skip > 0) {
            skip--;
            return;
          }
          armed = null;
          // After this chunk is written upstream, before the server's answer can come back.
          setImmediate(() => proxy.cut("stall"));
        },
      },
    );
    proxied = createPostgresStore({ url: proxy.url(TEST_POSTGRES_URL), connectTimeoutSeconds: 1, queryTimeoutMs: 500 });
    direct = createPostgresStore({ url: TEST_POSTGRES_URL });
    raw = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    proxy.restore();
    await proxied.close();
    await direct.close();
    await raw.end();
    await proxy.close();
  });

  it("gives the lease back once the server answers again, instead of leaving it to lapse", async () => {
    const id = newSessionId();
    await proxied.createSession({ id, userId: "lost-grant" });
    armed = id;
    const started = Date.now();
    let failure: unknown;
    try {
      await proxied.acquireLease(id, { ttlMs: 60_000, waitMs: 10_000 });
    } catch (error) {
      failure = error;
    }
    expect(isThreadkeepError(failure) && failure.code).toBe("store_unavailable");
    expect(Date.now() - started).toBeLessThan(5_000);
    // The grant did commit: the lease is held, by nobody who knows it, for a minute.
    const [row] = await raw<
      { left: string }[]
    >`SELECT expires_at - threadkeep_now_ms() AS left FROM leases WHERE session_id = ${id}`;
    expect(Number(row.left)).toBeGreaterThan(50_000);
    await expect(direct.acquireLease(id, { waitMs: 100 })).rejects.toMatchObject({ code: "session_busy" });

    await sleep(500);
    proxy.restore();
    const next = await direct.acquireLease(id, { waitMs: 15_000 });
    expect(Date.now() - started).toBeLessThan(20_000);
    await next.release();
    // The store works again through the proxy, and nothing of the lost waiter is left in line.
    const again = await proxied.acquireLease(id, { waitMs: 5_000 });
    await again.release();
    expect((await raw`SELECT 1 FROM lease_queue WHERE session_id = ${id}`).length).toBe(0);
  }, 40_000);

  it("takes the lost waiter's place in line back too, so the line does not wait for the ticket to lapse", async () => {
    const id = newSessionId();
    await proxied.createSession({ id, userId: "lost-ticket" });
    const holder = await direct.acquireLease(id, { ttlMs: 60_000 });
    // The waiter's first try (the lean grant, `tryLease`) finds the lease held; its second joins the
    // line, and that answer is lost.
    armed = id;
    skip = 1;
    await expect(proxied.acquireLease(id, { waitMs: 10_000 })).rejects.toMatchObject({ code: "store_unavailable" });
    const tickets = async () =>
      raw<
        { left: string }[]
      >`SELECT alive_until - threadkeep_now_ms() AS left FROM lease_queue WHERE session_id = ${id}`;
    const [ticket] = await tickets();
    expect(Number(ticket.left)).toBeGreaterThan(2_000);
    proxy.restore();
    // Gone well before it would have lapsed by itself.
    const deadline = Date.now() + Number(ticket.left) - 1_000;
    while ((await tickets()).length > 0) {
      if (Date.now() > deadline) throw new Error("the lost waiter's ticket was left to lapse");
      await sleep(50);
    }
    await holder.release();
    const started = Date.now();
    await (await direct.acquireLease(id, { waitMs: 10_000 })).release();
    expect(Date.now() - started).toBeLessThan(1_000);
  }, 40_000);
});
