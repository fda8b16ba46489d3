import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isThreadkeepError } from "../../src/core/errors.js";
import { newSessionId } from "../../src/core/ids.js";
import type { Message, FullStore } from "../../src/core/types.js";
import { SCHEMA_VERSION } from "../../src/stores/postgres/_schema.js";
import { atSchemaVersion } from "./_postgres-old-schema.js";
import { createPostgresStore, type PostgresStoreOptions } from "../../src/stores/postgres/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { until } from "../_wait.js";
import { expectCode, runStoreConformance } from "../../src/testing/index.js";

const enabled = await serviceAvailable("postgres");
// One schema per test file run, so parallel runs and other files never share tables.
const schema = `tk_test_${randomBytes(6).toString("hex")}`;
const extraSchemas: string[] = [];
const open = (extra: Partial<PostgresStoreOptions> = {}) =>
  createPostgresStore({ url: TEST_POSTGRES_URL, schema, poolSize: 4, ...extra });

runStoreConformance("postgres", () => open(), { enabled });

const storeModule = fileURLToPath(new URL("../../src/stores/postgres/index.ts", import.meta.url));

/** Asserts the messages are turns of a user message followed by its assistant reply, seq 1..n. */
function expectAdjacentTurns(all: Message[], turns: number): void {
  expect(all.map((m) => m.seq)).toEqual(Array.from({ length: turns * 2 }, (_, i) => i + 1));
  const seen = new Set<string>();
  for (let i = 0; i < all.length; i += 2) {
    const turn = String(all[i].content).replace(/-q$/, "");
    expect(all[i].role).toBe("user");
    expect(all[i + 1].content).toBe(`${turn}-a`);
    seen.add(turn);
  }
  expect(seen.size).toBe(turns);
}

/** One turn as the server runs it: lease → load → commit the question and the answer → release. */
async function turn(store: FullStore, sessionId: string, tag: string): Promise<void> {
  const lease = await store.acquireLease(sessionId, { waitMs: 120_000 });
  try {
    await store.getMessages(sessionId, { last: 20 });
    await store.appendMessages(sessionId, [{ role: "user", content: `${tag}-q` }], { fence: lease.fence });
    await store.appendMessages(sessionId, [{ role: "assistant", content: `${tag}-a` }], {
      fence: lease.fence,
    });
  } finally {
    await lease.release();
  }
}

/** A TCP proxy in front of PostgreSQL that the test can take away and bring back. */
class TcpProxy {
  #server: Server | null = null;
  #sockets = new Set<Socket>();
  port = 0;

  async start(): Promise<void> {
    const target = new URL(TEST_POSTGRES_URL);
    this.#server = createServer((client) => {
      const upstream = tcpConnect(Number(target.port || 5432), target.hostname);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on("close", () => this.#sockets.delete(s));
        s.on("error", () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => this.#server!.listen(this.port, "127.0.0.1", resolve));
    this.port = (this.#server.address() as { port: number }).port;
  }

  /** The test server's URL through this proxy (once started). */
  get url(): string {
    const url = new URL(TEST_POSTGRES_URL);
    url.port = String(this.port);
    return url.toString();
  }

  async stop(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise((resolve) => this.#server?.close(resolve));
    this.#server = null;
  }
}

/** How long after now `store` first reads `sessionId` again (it waits up to `timeoutMs`). */
async function msUntilReads(store: FullStore, sessionId: string, timeoutMs: number): Promise<number> {
  const from = Date.now();
  await until(
    "the store reads again",
    () =>
      store.getMessages(sessionId).then(
        () => true,
        () => false,
      ),
    { timeoutMs, everyMs: 20 },
  );
  return Date.now() - from;
}

describe.runIf(enabled === true)("postgres store specifics", () => {
  let admin: postgres.Sql;
  let store: FullStore;

  beforeAll(async () => {
    admin = postgres(TEST_POSTGRES_URL, { onnotice: () => {}, max: 2 });
    store = open();
  });

  afterAll(async () => {
    await store?.close();
    for (const name of [schema, ...extraSchemas]) await admin`DROP SCHEMA IF EXISTS ${admin(name)} CASCADE`;
    await admin?.end();
  });

  it("stores injection strings verbatim and leaves the tables intact", async () => {
    const evil = "'); DROP TABLE messages; --";
    const metadata = { title: `Robert'); DROP TABLE sessions;--`, quotes: `"double" 'single' $1 $$ \\ ;` };
    const userId = `user'; DELETE FROM sessions; --${randomBytes(4).toString("hex")}`;
    const session = await store.createSession({ id: newSessionId(), userId, metadata });
    await store.appendMessages(session.id, [{ role: "user", content: evil }]);
    await store.setState(session.id, { note: evil }, 0);
    await store.saveSummary(session.id, { fromSeq: 1, toSeq: 1, content: evil });
    expect((await store.getSession(session.id))?.metadata).toEqual(metadata);
    expect((await store.getMessages(session.id))[0].content).toBe(evil);
    expect((await store.getState(session.id)).data).toEqual({ note: evil });
    expect((await store.listSummaries(session.id))[0].content).toBe(evil);
    expect((await store.search({ userId, text: evil })).map((h) => h.seq)).toEqual([1]);
    expect(await store.search({ userId, text: evil, mode: "fulltext" })).toBeInstanceOf(Array);
    expect((await store.listSessions(userId)).sessions.map((s) => s.id)).toEqual([session.id]);
    const tables = await admin<{ table_name: string }[]>`
      SELECT table_name FROM information_schema.tables WHERE table_schema = ${schema} ORDER BY table_name`;
    expect(tables.map((t) => t.table_name)).toEqual([
      "branches",
      "embedding_models",
      "lease_queue",
      "leases",
      "message_vectors",
      "messages",
      "operations",
      "owner_stats",
      "session_state",
      "sessions",
      "summaries",
      "term_stats",
      "term_stats_log",
      "threadkeep_migrations",
      "threadkeep_settings",
      "user_memories",
      "vector_codes",
      "vector_ivf",
    ]);
  });

  it("migrates a fresh schema once when two stores start at the same time", async () => {
    const fresh = `tk_test_${randomBytes(6).toString("hex")}`;
    extraSchemas.push(fresh);
    const a = open({ schema: fresh });
    const b = open({ schema: fresh });
    try {
      const id = newSessionId();
      await Promise.all([a.getSession(id), b.getSession(id), a.listAllSessions(), b.countMessages(id)]);
      await a.createSession({ id, userId: "u" });
      expect((await b.getSession(id))?.userId).toBe("u");
      const versions = await admin`SELECT version FROM ${admin(fresh)}.threadkeep_migrations ORDER BY version`;
      expect(versions.map((v) => v.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("upgrades a version 10 schema to 11 (the append's cap guard), keeping its data, and caps at the boundary", async () => {
    const old = `tk_test_${randomBytes(6).toString("hex")}`;
    extraSchemas.push(old);
    const id = newSessionId();
    // A version 10 schema (the version 1 append function: the cap's DELETE unguarded), written to as
    // a process of that version does.
    await atSchemaVersion(old, 10, async (sql) => {
      const [{ def }] = await sql<{ def: string }[]>`SELECT pg_get_functiondef('threadkeep_append'::regproc) AS def`;
      expect(def).not.toContain("v_last - p_max >= 1");
      await sql`INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (${id}, 'u', 0, threadkeep_now_ms())`;
      const bodies = Array.from({ length: 199 }, (_, i) => JSON.stringify({ role: "user", content: `m${i + 1}` }));
      await sql`SELECT * FROM threadkeep_append_queued(${id}, ${bodies}::text[], ${bodies}::text[], NULL, NULL, 'english')`;
    });
    const after = open({ schema: old });
    try {
      await after.appendMessages(id, [{ role: "user", content: "m200" }], { maxMessages: 200 });
      expect((await after.getMessages(id)).map((m) => m.seq)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
      await after.appendMessages(id, [{ role: "user", content: "m201" }], { maxMessages: 200 });
      const kept = await after.getMessages(id);
      expect(kept.map((m) => m.seq)).toEqual(Array.from({ length: 200 }, (_, i) => i + 2));
      expect(kept[0].content).toBe("m2");
      const [{ def: upgraded }] = await admin<{ def: string }[]>`
        SELECT pg_get_functiondef(${`${old}.threadkeep_append`}::regproc) AS def`;
      expect(upgraded).toContain("v_last - p_max >= 1");
      const versions = await admin`SELECT version FROM ${admin(old)}.threadkeep_migrations ORDER BY version`;
      expect(versions.map((v) => v.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
    } finally {
      await after.close();
    }
  });

  it("upgrades a version 12 schema to 13 (one append function), and a version 12 process appends beside it", async () => {
    const old = `tk_test_${randomBytes(6).toString("hex")}`;
    extraSchemas.push(old);
    const id = newSessionId();
    const say = (content: string) => JSON.stringify({ role: "user", content });
    // What a version 12 process sends for a plain append (postgres/migrations/010-held-writes.ts).
    const oldAppend = (
      sql: postgres.Sql,
      content: string,
      fence: number | null = null,
      holder: string | null = null,
    ) => sql<{ out_status: string }[]>`
      SELECT out_status FROM threadkeep_append_held(${id}, ${[say(content)]}::text[], ${[content]}::text[], 200::bigint, ${fence}::bigint, ${holder}::text, NULL::regconfig)`;
    await atSchemaVersion(old, 12, async (sql) => {
      expect(
        await sql`SELECT 1 FROM pg_proc WHERE proname = 'threadkeep_append_fenced' AND pronamespace = current_schema()::regnamespace`,
      ).toHaveLength(0);
      await sql`INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (${id}, 'u', 0, threadkeep_now_ms())`;
      for (let i = 1; i <= 3; i++) expect((await oldAppend(sql, `old ${i}`))[0].out_status).toBe("ok");
    });
    const after = open({ schema: old });
    const v12 = postgres(TEST_POSTGRES_URL, { max: 4, onnotice: () => {}, connection: { search_path: old } });
    try {
      await after.appendMessages(id, [{ role: "user", content: "new 1" }], {
        maxMessages: 200,
        owner: { userId: "u" },
      });
      expect(
        await admin`SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE p.proname = 'threadkeep_append_fenced' AND n.nspname = ${old}`,
      ).toHaveLength(1);
      // Both versions' appends at once on one session: they queue on the same locks, seqs stay contiguous.
      await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          i % 2 === 0
            ? oldAppend(v12, `old ${4 + i}`).then(([row]) => expect(row.out_status).toBe("ok"))
            : after.appendMessages(id, [{ role: "user", content: `new ${2 + i}` }], { maxMessages: 200 }),
        ),
      );
      const all = await after.getMessages(id);
      expect(all.map((m) => m.seq)).toEqual(Array.from({ length: 44 }, (_, i) => i + 1));
      // A turn of this version fences a version 12 writer out: an older fence, or the same fence with
      // another holder, is refused by the old function, as a stale holder of this version is by the new.
      const turn = await after.openTurn!(id, { owner: { userId: "u" }, last: 20, lease: { ttlMs: 10_000 } });
      expect((await oldAppend(v12, "stale", turn.lease.fence - 1))[0].out_status).toBe("lease_expired");
      expect((await oldAppend(v12, "other holder", turn.lease.fence, "not-the-holder"))[0].out_status).toBe(
        "lease_expired",
      );
      await after.appendMessages(id, [{ role: "user", content: "committed" }], {
        fence: turn.lease.fence,
        releaseLease: true,
        owner: { userId: "u" },
      });
      // Released by the new function: a version 12 grant (the same statement) takes the lease at once.
      const [lease] = await admin<
        { expires_at: number }[]
      >`SELECT expires_at::float8 AS expires_at FROM ${admin(old)}.leases WHERE session_id = ${id}`;
      expect(lease.expires_at).toBe(0);
      expect((await after.getMessages(id, { last: 1 }))[0]).toMatchObject({ seq: 45, content: "committed" });
      const versions = await admin`SELECT version FROM ${admin(old)}.threadkeep_migrations ORDER BY version`;
      expect(versions.map((v) => v.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
    } finally {
      await v12.end();
      await after.close();
    }
  });

  it("upgrades a version 13 schema to 14 (the turn read as one document); a version 13 process's read still answers", async () => {
    const old = `tk_test_${randomBytes(6).toString("hex")}`;
    extraSchemas.push(old);
    const id = newSessionId();
    await atSchemaVersion(old, 13, async (sql) => {
      expect(
        await sql`SELECT 1 FROM pg_proc WHERE proname = 'threadkeep_turn_doc' AND pronamespace = current_schema()::regnamespace`,
      ).toHaveLength(0);
    });
    const after = open({ schema: old });
    const v13 = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {}, connection: { search_path: old } });
    try {
      await after.createSession({ id, userId: "u" });
      await after.appendMessages(id, [
        { role: "user", content: "one" },
        { role: "assistant", content: "two" },
      ]);
      const turn = await after.openTurn!(id, { owner: { userId: "u" }, last: 20 });
      expect(turn.messages.map((m) => m.content)).toEqual(["one", "two"]);
      // What a version 13 process's grant joins: the version 7 function, unchanged.
      const rows = await v13<
        { o_kind: string; o_body: string | null }[]
      >`SELECT o_kind, o_body FROM threadkeep_turn_read(${turn.lease.fence}::bigint, ${id}, 'u', NULL, 20)`;
      expect(rows.map((r) => r.o_kind).sort()).toEqual(["message", "message", "session"]);
      await turn.lease.release();
      const versions = await admin`SELECT version FROM ${admin(old)}.threadkeep_migrations ORDER BY version`;
      expect(versions.map((v) => v.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
    } finally {
      await v13.end();
      await after.close();
    }
  });

  it("serialises 2 stores × 100 concurrent turns on one session: contiguous seq, turns adjacent", async () => {
    const second = open();
    try {
      const session = await store.createSession({ id: newSessionId(), userId: "u" });
      await Promise.all(
        [store, second].flatMap((s, p) => Array.from({ length: 100 }, (_, i) => turn(s, session.id, `p${p}t${i}`))),
      );
      expectAdjacentTurns(await store.getMessages(session.id), 200);
    } finally {
      await second.close();
    }
  }, 120_000);

  it("serialises 2 processes × 100 concurrent turns on one session", async () => {
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    // Each child connects, says ready, and starts its 100 turns when told, so both hammer at once.
    const code = `
      const { createPostgresStore } = await import(${JSON.stringify(storeModule)});
      const store = createPostgresStore({ url: process.env.URL, schema: process.env.SCHEMA, poolSize: 4 });
      await store.getSession(process.env.SID);
      process.stdout.write("ready\\n");
      await new Promise((resolve) => process.stdin.once("data", resolve));
      const sid = process.env.SID;
      await Promise.all(Array.from({ length: 100 }, async (_, i) => {
        const lease = await store.acquireLease(sid, { waitMs: 120000 });
        try {
          await store.getMessages(sid, { last: 20 });
          await store.appendMessages(sid, [{ role: "user", content: process.env.TAG + i + "-q" }], { fence: lease.fence });
          await store.appendMessages(sid, [{ role: "assistant", content: process.env.TAG + i + "-a" }], { fence: lease.fence });
        } finally {
          await lease.release();
        }
      }));
      await store.close();
    `;
    const children: ChildProcess[] = ["A", "B"].map((tag) =>
      spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
        env: { ...process.env, URL: TEST_POSTGRES_URL, SCHEMA: schema, SID: session.id, TAG: `proc${tag}-` },
        stdio: ["pipe", "pipe", "inherit"],
      }),
    );
    await Promise.all(
      children.map((child) => new Promise<void>((resolve) => child.stdout!.once("data", () => resolve()))),
    );
    const exits = children.map((child) => new Promise<number | null>((resolve) => child.on("exit", resolve)));
    for (const child of children) child.stdin!.end("go\n");
    expect(await Promise.all(exits)).toEqual([0, 0]);
    expectAdjacentTurns(await store.getMessages(session.id), 200);
  }, 120_000);

  it("keeps arrival order across stores, even against a waiter in the releasing store", async () => {
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    const other = open();
    try {
      // Connected first, so the 150 ms below cover the waiter's first try, not the store's opening.
      await other.listAllSessions({ limit: 1 });
      const order: string[] = [];
      const held = await store.acquireLease(session.id);
      const take = (s: FullStore, name: string) =>
        s.acquireLease(session.id, { waitMs: 10_000 }).then(async (lease) => {
          order.push(name);
          await lease.release();
        });
      const first = take(other, "other store, arrived first");
      await new Promise((resolve) => setTimeout(resolve, 150));
      const second = take(store, "same store, arrived second");
      await new Promise((resolve) => setTimeout(resolve, 150));
      await held.release();
      await Promise.all([first, second]);
      expect(order).toEqual(["other store, arrived first", "same store, arrived second"]);
    } finally {
      await other.close();
    }
  });

  it("gives a crashed holder's turn to another store once its lease lapses", async () => {
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    const other = open();
    try {
      const abandoned = await store.acquireLease(session.id, { ttlMs: 300 });
      const started = Date.now();
      const next = await other.acquireLease(session.id, { waitMs: 5_000 });
      expect(Date.now() - started).toBeGreaterThanOrEqual(200);
      expect(next.fence).toBeGreaterThan(abandoned.fence);
      await expectCode(
        store.appendMessages(session.id, [{ role: "user", content: "late" }], { fence: abandoned.fence }),
        "lease_expired",
      );
      await next.release();
    } finally {
      await other.close();
    }
  });

  it("expires inactive sessions in bounded batches", async () => {
    const batched = open({ expireBatchSize: 4 });
    try {
      const old = Date.now() - 30 * 86_400_000;
      const stale = await Promise.all(
        Array.from({ length: 25 }, () => batched.createSession({ id: newSessionId(), userId: "expiring" })),
      );
      for (const s of stale) {
        await batched.appendMessages(s.id, [{ role: "user", content: "old" }]);
        await batched.touchSession(s.id, old);
      }
      const fresh = await batched.createSession({ id: newSessionId(), userId: "expiring" });
      const removed = await batched.expire(old + 1000);
      expect([...removed].sort()).toEqual(stale.map((s) => s.id).sort());
      const ids = stale.map((s) => s.id);
      const [left] = await admin`
        SELECT count(*)::int AS n FROM ${admin(schema)}.messages WHERE session_id = ANY(${ids}::text[])`;
      expect(left.n).toBe(0);
      expect(await batched.getSession(fresh.id)).not.toBeNull();
    } finally {
      await batched.close();
    }
  });

  it("stems with the default english configuration and rebuilds the index when the language changes", async () => {
    const session = await store.createSession({ id: newSessionId(), userId: "en" });
    await store.appendMessages(session.id, [{ role: "user", content: "The foxes jumped over the fences" }]);
    const q = (s: FullStore, id: string) =>
      s.search({ userId: "en", sessionId: id, text: "fox jumping", mode: "fulltext" });
    expect((await q(store, session.id)).map((h) => h.seq)).toEqual([1]);
    // `simple` does not stem: opened on a schema indexed in English, it rebuilds the index, and the
    // same words no longer meet; back in English they do again.
    const other = `tk_test_${randomBytes(6).toString("hex")}`;
    extraSchemas.push(other);
    const english = open({ schema: other });
    const id = (await english.createSession({ id: newSessionId(), userId: "en" })).id;
    await english.appendMessages(id, [{ role: "user", content: "The foxes jumped over the fences" }]);
    expect((await q(english, id)).map((h) => h.seq)).toEqual([1]);
    await english.close();
    const simple = open({ schema: other, ftsLanguage: "simple" });
    expect(await q(simple, id)).toEqual([]);
    await simple.close();
    const again = open({ schema: other });
    expect((await q(again, id)).map((h) => h.seq)).toEqual([1]);
    await again.close();
    const unknown = open({ ftsLanguage: "klingon" });
    await expectCode(unknown.getSession(newSessionId()), "invalid_request");
    await unknown.close();
  });

  it("fails fast with store_unavailable when nothing listens", async () => {
    const dead = createPostgresStore({
      url: "postgres://postgres@127.0.0.1:1/test",
      connectTimeoutSeconds: 2,
    });
    const started = Date.now();
    await expectCode(dead.getSession(newSessionId()), "store_unavailable");
    await expectCode(dead.acquireLease(newSessionId(), { waitMs: 1000 }), "store_unavailable");
    expect(Date.now() - started).toBeLessThan(3_000);
    await dead.close();
  });

  it("surfaces an outage as store_unavailable within seconds and recovers when the server is back", async () => {
    const proxy = new TcpProxy();
    await proxy.start();
    const flaky = open({ url: proxy.url, connectTimeoutSeconds: 2, queryTimeoutMs: 3_000 });
    try {
      const session = await flaky.createSession({ id: newSessionId(), userId: "u" });
      await flaky.appendMessages(session.id, [{ role: "user", content: "before" }]);
      await proxy.stop();
      for (const attempt of [
        () => flaky.getMessages(session.id),
        () => flaky.appendMessages(session.id, [{ role: "user", content: "during" }]),
        () => flaky.acquireLease(session.id, { waitMs: 10_000 }),
      ]) {
        const started = Date.now();
        let caught: unknown;
        await attempt().catch((error) => {
          caught = error;
        });
        expect(isThreadkeepError(caught, "store_unavailable"), String(caught)).toBe(true);
        expect(Date.now() - started).toBeLessThan(5_000);
      }
      await proxy.start();
      // Back within a probe of the store's and a retry of the driver's (250 ms each), not at once.
      expect(await msUntilReads(flaky, session.id, 5_000)).toBeLessThan(2_000);
      await flaky.appendMessages(session.id, [{ role: "user", content: "after" }]);
      expect((await flaky.getMessages(session.id)).map((m) => m.content)).toEqual(["before", "after"]);
      const lease = await flaky.acquireLease(session.id);
      await lease.release();
    } finally {
      await flaky.close();
      await proxy.stop();
    }
  }, 30_000);

  it("reaches the server within a second of its return after an outage that kept operations coming", async () => {
    // The driver refuses queries with its last connect failure until its next attempt, and by default
    // waits threefold longer after each failure (up to 20 s): 5 s of operations failing against an
    // absent server would leave it refusing for seconds after the server is back. The store retries
    // within its probe interval (postgres/_client.ts).
    const proxy = new TcpProxy();
    await proxy.start();
    const flaky = open({ url: proxy.url, connectTimeoutSeconds: 5, queryTimeoutMs: 3_000 });
    try {
      const session = await flaky.createSession({ id: newSessionId(), userId: "u" });
      await proxy.stop();
      const down = Date.now();
      let failures = 0;
      while (Date.now() - down < 5_500) {
        await flaky.getMessages(session.id).catch((error: unknown) => {
          expect(isThreadkeepError(error, "store_unavailable"), String(error)).toBe(true);
          failures++;
        });
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(failures).toBeGreaterThan(50);
      await proxy.start();
      expect(await msUntilReads(flaky, session.id, 15_000)).toBeLessThan(1_000);
    } finally {
      await flaky.close();
      await proxy.stop();
    }
  }, 40_000);
});
