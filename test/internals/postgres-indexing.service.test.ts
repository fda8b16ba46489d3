/**
 * Full-text indexing off the append (PostgreSQL schema version 12, `postgres/_indexing.ts`): a message
 * is found the moment its append returns, whether or not the background drain has indexed it, on both
 * search paths; the drain indexes a bounded batch per statement and empties the backlog by itself; a
 * process of the previous version keeps indexing its own appends during an upgrade.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { DEFER_UP_TO, INDEX_BATCH } from "../../src/stores/postgres/_indexing.js";
import { OWNER_SCAN_LIMIT } from "../../src/stores/postgres/_search.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { atSchemaVersion } from "./_postgres-old-schema.js";

const enabled = await serviceAvailable("postgres");
const schema = `tk_test_${randomBytes(6).toString("hex")}`;
const extraSchemas: string[] = [];

describe.skipIf(enabled !== true)("postgres full-text indexing off the append", () => {
  const store = createPostgresStore({ url: TEST_POSTGRES_URL, schema, poolSize: 2 });
  // Its drain waits a minute after a write, so what it appended stays pending through a test.
  const slow = createPostgresStore({ url: TEST_POSTGRES_URL, schema, poolSize: 2, searchIndexDelayMs: 60_000 });
  const admin = postgres(TEST_POSTGRES_URL, { max: 2, onnotice: () => {}, connection: { search_path: schema } });
  afterAll(async () => {
    await store.close();
    await slow.close();
    for (const name of [schema, ...extraSchemas]) await admin.unsafe(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
    await admin.end();
  });
  const pending = async (id?: string) =>
    (
      await admin<
        { n: number }[]
      >`SELECT count(*)::int AS n FROM messages WHERE tsv IS NULL ${id ? admin`AND session_id = ${id}` : admin``}`
    )[0].n;
  const until = async (check: () => Promise<boolean>) => {
    const deadline = Date.now() + 20_000;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error("timed out");
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  it("finds a message right after its append, before the drain indexed it, scanned or by the GIN index", async () => {
    const owner = `u-${randomBytes(4).toString("hex")}`;
    const small = await slow.createSession({ id: newSessionId(), userId: owner });
    await slow.appendMessages(small.id, [{ role: "user", content: "The foxes jumped over the fences" }]);
    // Appended unindexed, and left so: this store's drain starts a minute after the append.
    expect(await pending(small.id)).toBe(1);
    const hits = await slow.search({ userId: owner, text: "fox jumping", mode: "fulltext" });
    expect(hits.map((h) => [h.sessionId, h.seq])).toEqual([[small.id, 1]]);
    const ranked = await slow.search({ userId: owner, text: "fences", mode: "fulltext", ranking: "relevance" });
    expect(ranked.map((h) => h.seq)).toEqual([1]);
    // A large owner is searched through the GIN index; pending rows come from the index of pending rows.
    const big = await slow.createSession({ id: newSessionId(), userId: owner });
    for (let done = 0; done <= OWNER_SCAN_LIMIT; done += 5_000) {
      await slow.appendMessages(
        big.id,
        Array.from({ length: 5_000 }, (_, i) => ({ role: "user" as const, content: `filler ${done + i}` })),
      );
    }
    await admin`SELECT threadkeep_index_pending('english', 100000)`;
    await slow.appendMessages(big.id, [{ role: "user", content: "a zebra, just now" }]);
    // Search orders by creation time (ms), then seq: two appends within one millisecond would tie and
    // come back by seq, the big session's first. A fresh millisecond makes the expected order the only one.
    const first = Date.now();
    while (Date.now() <= first + 1) await new Promise((r) => setTimeout(r, 1));
    await slow.appendMessages(small.id, [{ role: "user", content: "zebras everywhere" }]);
    expect(await pending()).toBe(2);
    const zebras = await slow.search({ userId: owner, text: "zebra", mode: "fulltext" });
    expect(zebras.map((h) => h.message.content)).toEqual(["zebras everywhere", "a zebra, just now"]);
    // Indexed, the same answer.
    await admin`SELECT threadkeep_index_pending('english', 100000)`;
    expect(
      (await slow.search({ userId: owner, text: "zebra", mode: "fulltext" })).map((h) => h.message.content),
    ).toEqual(["zebras everywhere", "a zebra, just now"]);
  }, 120_000);

  it("indexes at most one batch per drain statement, and the background drain empties the backlog", async () => {
    const session = await slow.createSession({ id: newSessionId(), userId: "drain" });
    const count = 3 * INDEX_BATCH + 7;
    for (let i = 0; i < count; i += DEFER_UP_TO) {
      const n = Math.min(DEFER_UP_TO, count - i);
      await slow.appendMessages(
        session.id,
        Array.from({ length: n }, (_, k) => ({ role: "user" as const, content: `word${i + k}` })),
      );
    }
    const before = await pending();
    expect(before).toBeGreaterThanOrEqual(count);
    const [{ n }] = await admin<{ n: number }[]>`SELECT threadkeep_index_pending('english', ${INDEX_BATCH}) AS n`;
    expect(n).toBe(INDEX_BATCH);
    expect(await pending()).toBe(before - INDEX_BATCH);
    // The background drain of a store that writes takes the rest, a batch at a time.
    await store.appendMessages(session.id, [{ role: "user", content: "one more" }]);
    await until(async () => (await pending()) === 0);
    const [{ indexed }] = await admin<{ indexed: number }[]>`
      SELECT count(*)::int AS indexed FROM messages WHERE session_id = ${session.id} AND tsv = to_tsvector('english', search_text)`;
    expect(indexed).toBe(count + 1);
  });

  it("indexes a large append (an import, a migration) in the append itself", async () => {
    const session = await slow.createSession({ id: newSessionId(), userId: "bulk" });
    await slow.appendMessages(
      session.id,
      Array.from({ length: DEFER_UP_TO + 1 }, (_, i) => ({ role: "user" as const, content: `bulk ${i}` })),
    );
    expect(await pending(session.id)).toBe(0);
    await slow.replaceAfter(
      session.id,
      0,
      Array.from({ length: DEFER_UP_TO + 1 }, (_, i) => ({ role: "user" as const, content: `again ${i}` })),
    );
    expect(await pending(session.id)).toBe(0);
    await slow.replaceAfter(session.id, DEFER_UP_TO, [{ role: "user", content: "small" }]);
    expect(await pending(session.id)).toBe(1);
  });

  it("upgrades a table whose re-indexing outlasts the query timeout (the migration is not cut off)", async () => {
    const old = `tk_test_${randomBytes(6).toString("hex")}`;
    extraSchemas.push(old);
    const id = newSessionId();
    // v12 rebuilds the full-text index at about 13 s per million messages on 2 cores (its migration's
    // note): 30,000 rows take ~0.4 s, twenty times the 20 ms query timeout below; the version 19 step
    // (one statement counting every owner's terms over all rows) is checked to outlast it too.
    const ROWS = 30_000;
    const QUERY_TIMEOUT_MS = 20;
    await atSchemaVersion(old, 11, async (sql) => {
      await sql`INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (${id}, 'big', 0, threadkeep_now_ms())`;
      await sql`INSERT INTO messages (session_id, seq, body, search_text, tsv, created_at)
        SELECT ${id}, g, '{"role":"user","content":"m"}', t, to_tsvector('english', t), 0
        FROM generate_series(1, ${ROWS}::int) AS g, LATERAL (SELECT 'message number ' || g || ' about ' || md5(g::text) AS t) AS x`;
    });
    const upgraded = createPostgresStore({
      url: `${TEST_POSTGRES_URL}?query_timeout=${QUERY_TIMEOUT_MS}`,
      schema: old,
      poolSize: 2,
    });
    try {
      let session = null;
      const deadline = Date.now() + 90_000;
      while (session === null && Date.now() < deadline) {
        // Operations that wait on the migration miss their 20 ms deadline; the migration goes on.
        session = await upgraded.getSession(id).catch(() => null);
        if (session === null) await new Promise((r) => setTimeout(r, 200));
      }
      expect(session?.userId).toBe("big");
      const steps = await admin<{ version: number; applied_at: string }[]>`
        SELECT version, applied_at FROM ${admin(old)}.threadkeep_migrations WHERE version >= 18 ORDER BY version`;
      expect(steps.at(-1)!.version).toBeGreaterThanOrEqual(19);
      // The table is large enough that the timeout would have cut the migration (1.5 s measured at load 17).
      const termCount =
        Number(steps.find((s) => s.version === 19)!.applied_at) -
        Number(steps.find((s) => s.version === 18)!.applied_at);
      expect(termCount).toBeGreaterThan(QUERY_TIMEOUT_MS);
    } finally {
      await upgraded.close();
    }
  }, 120_000);

  it("keeps an older process's appends indexed as it writes them, and finds theirs and its own", async () => {
    const old = `tk_test_${randomBytes(6).toString("hex")}`;
    extraSchemas.push(old);
    const id = newSessionId();
    const append = (sql: postgres.Sql, text: string) =>
      sql`SELECT * FROM threadkeep_append_held(${id}, ${[JSON.stringify({ role: "user", content: text })]}::text[], ${[text]}::text[],
        200, NULL, NULL, 'english')`;
    await atSchemaVersion(old, 11, async (sql) => {
      await sql`INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (${id}, 'old', 0, threadkeep_now_ms())`;
      await append(sql, "written by version eleven");
    });
    const upgraded = createPostgresStore({
      url: TEST_POSTGRES_URL,
      schema: old,
      poolSize: 2,
      searchIndexDelayMs: 60_000,
    });
    try {
      await upgraded.appendMessages(id, [{ role: "user", content: "written by version twelve" }]);
      // A process of version 11 still running: its append function indexes as it did.
      await atSchemaVersion(old, 12, (sql) => append(sql, "eleven again"));
      const tsvs = await admin<{ seq: number; indexed: boolean }[]>`
        SELECT seq, tsv IS NOT NULL AS indexed FROM ${admin(old)}.messages WHERE session_id = ${id} ORDER BY seq`;
      expect(tsvs.map((r) => r.indexed)).toEqual([true, false, true]);
      const found = await upgraded.search({ userId: "old", text: "written", mode: "fulltext" });
      expect(found.map((h) => h.seq)).toEqual([2, 1]);
    } finally {
      await upgraded.close();
    }
  });
});
