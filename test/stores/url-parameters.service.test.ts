/**
 * The store URL parameters the docs name: PostgreSQL's `?connect_timeout=` (seconds) and
 * `?query_timeout=` (ms), and SQLite's `?lease=shared`. A valid value opens a working store (the
 * parameters are taken out before the driver sees the URL), an invalid one fails with
 * `invalid_store_url` naming it, and each has its effect on a real server.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { isThreadkeepError } from "../../src/core/errors.js";
import { newSessionId } from "../../src/core/ids.js";
import type { FullStore } from "../../src/core/types.js";
import { createStore } from "../../src/stores/url.js";
import { expectCode } from "../../src/testing/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { startTcpProxy } from "../_tcp-proxy.js";
import { timedFailure } from "../_timed-failure.js";

const enabled = await serviceAvailable("postgres");
const dir = mkdtempSync(join(tmpdir(), "threadkeep-url-params-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const withParams = (url: string, params: string) => `${url}${url.includes("?") ? "&" : "?"}${params}`;

/**
 * Holds a session row locked in a transaction of `raw` until `release()`; `blocked()` counts the
 * statements waiting for that lock.
 */
function lockRow(raw: postgres.Sql, id: string): Promise<{ release: () => void; blocked: () => Promise<number> }> {
  return new Promise((resolveLocked, rejectLocked) => {
    raw
      .begin(async (tx) => {
        const [{ pid }] = await tx<
          { pid: number }[]
        >`SELECT id, pg_backend_pid() AS pid FROM sessions WHERE id = ${id} FOR UPDATE`;
        const blocked = async () =>
          (
            await raw<
              { n: number }[]
            >`SELECT count(*)::int AS n FROM pg_stat_activity WHERE ${pid}::int = ANY(pg_blocking_pids(pid))`
          )[0].n;
        await new Promise<void>((release) => resolveLocked({ release, blocked }));
      })
      .catch(rejectLocked);
  });
}

describe("postgres URL parameters: invalid values", () => {
  it.each([
    ["connect_timeout=abc", "connect_timeout"],
    ["connect_timeout=0", "connect_timeout"],
    ["connect_timeout=-1", "connect_timeout"],
    ["connect_timeout=", "connect_timeout"],
    ["query_timeout=5s", "query_timeout"],
    ["query_timeout=0", "query_timeout"],
    ["query_timeout=Infinity", "query_timeout"],
    ["connect_timeout=2&query_timeout=never", "query_timeout"],
  ])("refuses ?%s with invalid_store_url naming %s", async (params, name) => {
    const error = await createStore(`postgres://postgres@127.0.0.1:5432/test?${params}`).catch((e) => e);
    expect(isThreadkeepError(error) && error.code).toBe("invalid_store_url");
    expect(error.message).toContain(name);
  });
});

describe.skipIf(enabled !== true)("postgres URL parameters on a real server", () => {
  const stores: FullStore[] = [];
  const open = async (url: string) => {
    const store = await createStore(url);
    stores.push(store);
    return store;
  };
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
  });

  it("opens a working store with both parameters, fractional seconds too (the server never sees them)", async () => {
    const store = await open(withParams(TEST_POSTGRES_URL, "connect_timeout=1.5&query_timeout=4000"));
    const session = await store.createSession({ id: newSessionId(), userId: "params" });
    await store.appendMessages(session.id, [{ role: "user", content: "hello" }]);
    expect(await store.countMessages(session.id)).toBe(1);
  });

  it("query_timeout: a statement with no answer in time fails, and the server stops it too", async () => {
    const store = await open(withParams(TEST_POSTGRES_URL, "query_timeout=1000"));
    // The first operation also connects and checks the schema, within the same deadline: on a busy
    // machine it may need another try, after the pause a store takes before it tries a server it
    // found down again (~250 ms).
    for (let tries = 1; ; tries++) {
      const ok = await store.getSession(newSessionId()).then(
        () => true,
        () => false,
      );
      if (ok) break;
      if (tries === 8) throw new Error("the store did not open in 8 tries");
      await new Promise((r) => setTimeout(r, 400));
    }
    const id = newSessionId();
    await store.createSession({ id, userId: "slow" });
    const raw = postgres(TEST_POSTGRES_URL, { max: 2, onnotice: () => {} });
    try {
      // Another transaction holds the session row, so the append waits on its lock.
      const lock = await lockRow(raw, id);
      const late = await timedFailure(() => store.appendMessages(id, [{ role: "user", content: "late" }]));
      expect(late.code, String(late.error)).toBe("store_unavailable");
      expect(late.ms).toBeGreaterThanOrEqual(950);
      expect(late.ms).toBeLessThan(4_000);
      // The server cancelled it (statement_timeout): nothing waits on the lock, and once it is free
      // the append has not landed.
      const deadline = Date.now() + 2_000;
      while ((await lock.blocked()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(await lock.blocked()).toBe(0);
      lock.release();
      await new Promise((r) => setTimeout(r, 200));
      expect(await store.countMessages(id)).toBe(0);
    } finally {
      await raw.end();
    }
    // The default (5 s) would have waited on the same lock: the parameter, not the lock, ended it.
    const patient = await open(TEST_POSTGRES_URL);
    const raw2 = postgres(TEST_POSTGRES_URL, { max: 2, onnotice: () => {} });
    try {
      const lock = await lockRow(raw2, id);
      const append = patient.appendMessages(id, [{ role: "user", content: "waited" }]);
      await new Promise((r) => setTimeout(r, 1_500));
      expect(await lock.blocked()).toBe(1);
      lock.release();
      expect((await append)[0].seq).toBe(1);
    } finally {
      await raw2.end();
    }
  });

  it("connect_timeout: a server that does not answer fails the first operation after that many seconds", async () => {
    const target = new URL(TEST_POSTGRES_URL);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    try {
      proxy.cut("stall");
      const quick = await open(withParams(proxy.url(TEST_POSTGRES_URL), "connect_timeout=0.5&query_timeout=10000"));
      const slow = await open(withParams(proxy.url(TEST_POSTGRES_URL), "connect_timeout=2&query_timeout=10000"));
      const [a, b] = await Promise.all([
        timedFailure(() => quick.getSession(newSessionId())),
        timedFailure(() => slow.getSession(newSessionId())),
      ]);
      expect([a.code, b.code]).toEqual(["store_unavailable", "store_unavailable"]);
      expect(a.ms).toBeGreaterThanOrEqual(400);
      expect(b.ms).toBeGreaterThanOrEqual(1_900);
      expect(a.ms).toBeLessThan(b.ms - 800);
      // Well before the 10 s query timeout either way.
      expect(b.ms).toBeLessThan(8_000);
    } finally {
      proxy.restore();
      await proxy.close();
    }
  });
});

describe("sqlite URL parameter ?lease=shared", () => {
  it("keeps the lease in the file with lease=shared: a second store on the file waits for the first's turn", async () => {
    const path = join(dir, "shared.db");
    const a = await createStore(`sqlite:${path}?lease=shared`);
    const b = await createStore(`sqlite:${path}?lease=shared`);
    try {
      const session = await a.createSession({ id: newSessionId(), userId: "two" });
      const held = await a.acquireLease(session.id, { ttlMs: 10_000 });
      await expectCode(b.acquireLease(session.id, { waitMs: 100 }), "session_busy");
      await held.release();
      await (await b.acquireLease(session.id, { waitMs: 2_000 })).release();
    } finally {
      await a.close();
      await b.close();
    }
    expect(readdirSync(dir).filter((f) => f.includes("?"))).toEqual([]);
  });

  it.each(["lease=Shared", "lease=exclusive", "lease=", "lease=shared&cache=private", "mode=ro"])(
    "refuses ?%s with invalid_store_url instead of opening a file of that name",
    async (params) => {
      const error = await createStore(`sqlite:${join(dir, "typo.db")}?${params}`).catch((e) => e);
      expect(isThreadkeepError(error) && error.code).toBe("invalid_store_url");
      expect(error.message).toContain(params.split("&").at(-1)!.split("=")[0]);
      expect(readdirSync(dir).filter((f) => f.startsWith("typo"))).toEqual([]);
    },
  );

  it("still opens a path with an escaped question mark", async () => {
    const store = await createStore(`sqlite:${join(dir, "what%3F.db")}`);
    await store.createSession({ id: newSessionId(), userId: "q" });
    await store.close();
    expect(readdirSync(dir)).toContain("what?.db");
  });
});
