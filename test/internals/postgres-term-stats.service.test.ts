/**
 * Owners' term statistics (PostgreSQL schema version 19, `migrations/019-term-stats.ts`), which
 * relevance search reads for BM25: after every way messages are indexed and removed — the background
 * drain, a large append indexed in place, a cap, a pop, a truncation, a rewind that replaces messages,
 * a session's deletion — they equal a recount from the messages themselves, per owner and lexeme; and
 * since version 21 (the drain counting its own terms, `migrations/021-lean-turns.ts`), after an upgrade
 * that finds rows pending and changes logged by version 20.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { DEFER_UP_TO } from "../../src/stores/postgres/_indexing.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { atSchemaVersion } from "./_postgres-old-schema.js";

const enabled = await serviceAvailable("postgres");
const schema = `tk_test_${randomBytes(6).toString("hex")}`;

describe.skipIf(enabled !== true)("postgres owners' term statistics", () => {
  // The drain is driven by hand here (threadkeep_index_pending), so the delay keeps it out of the way.
  const store = createPostgresStore({ url: TEST_POSTGRES_URL, schema, poolSize: 2, searchIndexDelayMs: 60_000 });
  const admin = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
  afterAll(async () => {
    await store.close();
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  const drain = () => admin`SELECT threadkeep_index_pending('english', 100000)`;
  /** Kept statistics and a recount, both without the rows at 0 (kept rows may stay at 0). */
  const compare = async () => {
    await drain(); // folds the logged changes
    const kept = await admin<{ user_id: string; lexeme: string; df: string }[]>`
      SELECT user_id, lexeme, df::text FROM term_stats WHERE df <> 0 ORDER BY 1, 2`;
    const counted = await admin<{ user_id: string; lexeme: string; df: string }[]>`
      SELECT s.user_id, l.lexeme, count(*)::text AS df FROM messages m JOIN sessions s ON s.id = m.session_id
      CROSS JOIN LATERAL unnest(tsvector_to_array(m.tsv)) l(lexeme) WHERE m.tsv IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2`;
    expect(kept).toEqual(counted);
    const owners = await admin<{ user_id: string; docs: string; lexemes: string }[]>`
      SELECT user_id, docs::text, lexemes::text FROM owner_stats WHERE docs <> 0 ORDER BY 1`;
    const recount = await admin<{ user_id: string; docs: string; lexemes: string }[]>`
      SELECT s.user_id, count(*)::text AS docs, sum(length(m.tsv))::text AS lexemes FROM messages m JOIN sessions s ON s.id = m.session_id
      WHERE m.tsv IS NOT NULL GROUP BY 1 ORDER BY 1`;
    expect(owners).toEqual(recount);
    return kept.length;
  };

  it("equal a recount after drains, in-place indexing, caps, pops, truncations, rewinds and deletions", async () => {
    const alice = `alice-${randomBytes(4).toString("hex")}`;
    const bob = `bob-${randomBytes(4).toString("hex")}`;
    const a1 = await store.createSession({ id: newSessionId(), userId: alice });
    const a2 = await store.createSession({ id: newSessionId(), userId: alice });
    const b1 = await store.createSession({ id: newSessionId(), userId: bob });
    const say = (content: string) => ({ role: "user" as const, content });
    // Thin appends stay pending: nothing counted until the drain.
    await store.appendMessages(a1.id, [say("zebras crossing the road"), say("a giraffe and a zebra")]);
    await store.appendMessages(b1.id, [say("the zebra of bob")]);
    expect((await admin`SELECT * FROM term_stats WHERE df <> 0`).length).toBe(0);
    expect(await compare()).toBeGreaterThan(0);
    // A large append is indexed (and counted) in place.
    const many = Array.from({ length: DEFER_UP_TO + 4 }, (_, i) =>
      say(`import line ${i} about lions ${i % 3 === 0 ? "and zebras" : ""}`),
    );
    await store.appendMessages(a2.id, many);
    expect(
      (await admin`SELECT count(*)::int AS n FROM messages WHERE session_id = ${a2.id} AND tsv IS NULL`)[0].n,
    ).toBe(0);
    await compare();
    // A cap drops the oldest (indexed) messages within the append.
    await store.appendMessages(a2.id, [say("capped lions")], { maxMessages: 5 });
    await drain();
    await compare();
    expect(await store.popMessage(a1.id)).not.toBeNull();
    await compare();
    await store.appendMessages(a1.id, [say("walrus one"), say("walrus two"), say("walrus three")]);
    await drain();
    await store.truncateAfter(a1.id, 2);
    await compare();
    await store.replaceAfter(a1.id, 1, [say("a rewound zebra")]);
    await drain();
    await compare();
    // Deleting a session subtracts its messages (the cascade could no longer find their owner).
    expect(await store.deleteSession(a2.id)).toBe(true);
    await compare();
    // Relevance search reads them: alice's messages holding either word, both words first; not bob's.
    const hits = await store.search({ userId: alice, text: "zebra road", mode: "fulltext", ranking: "relevance" });
    expect(hits.map((h) => h.message.content)).toEqual(["zebras crossing the road", "a rewound zebra"]);
  }, 60_000);

  it("still equal a recount when a schema-20 database with pending rows and unfolded changes is upgraded", async () => {
    const old = `tk_test_${randomBytes(6).toString("hex")}`;
    const owner = `carol-${randomBytes(4).toString("hex")}`;
    try {
      await atSchemaVersion(old, 20, async (sql) => {
        for (const id of ["s1", "s2"]) {
          await sql`INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (${id}, ${owner}, 0, threadkeep_now_ms())`;
        }
        const append = (id: string, texts: string[], lang: string | null) =>
          sql`SELECT out_status FROM threadkeep_append_scoped(${id}, ${texts.map((t) => JSON.stringify({ role: "user", content: t }))}::text[],
            ${texts}::text[], NULL::bigint, false, NULL::bigint, NULL::text, false, ${lang}::regconfig, ${owner}::text, 0::bigint)`;
        // Version 20's thin appends leave their rows pending; its large ones log their terms unfolded.
        await append("s1", ["otters in the river", "an otter and a heron"], null);
        await append("s2", ["herons", "otters", "rivers of otters"], "english");
        expect((await sql`SELECT 1 FROM messages WHERE tsv IS NULL`).length).toBe(2);
        expect((await sql`SELECT 1 FROM term_stats_log`).length).toBeGreaterThan(0);
      });
      const upgraded = createPostgresStore({
        url: TEST_POSTGRES_URL,
        schema: old,
        poolSize: 2,
        searchIndexDelayMs: 60_000,
      });
      const sql = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {}, connection: { search_path: old } });
      try {
        expect(await upgraded.getSession("s1")).not.toBeNull();
        await upgraded.appendMessages("s1", [{ role: "user", content: "a heron after the upgrade" }]);
        await sql`SELECT threadkeep_index_pending('english', 100000)`;
        expect((await sql`SELECT 1 FROM messages WHERE tsv IS NULL`).length).toBe(0);
        expect((await sql`SELECT 1 FROM term_stats_log`).length).toBe(0);
        const kept = await sql`SELECT lexeme, df::int FROM term_stats WHERE df <> 0 ORDER BY 1`;
        const counted = await sql`
          SELECT l.lexeme, count(*)::int AS df FROM messages m CROSS JOIN LATERAL unnest(tsvector_to_array(m.tsv)) l(lexeme)
          GROUP BY 1 ORDER BY 1`;
        expect(kept).toEqual(counted);
        const [docs] = await sql`SELECT docs::int, lexemes::int FROM owner_stats WHERE user_id = ${owner}`;
        const [recount] = await sql`SELECT count(*)::int AS docs, sum(length(tsv))::int AS lexemes FROM messages`;
        expect(docs).toEqual(recount);
        expect(docs.docs).toBe(6);
      } finally {
        await upgraded.close();
        await sql.end();
      }
    } finally {
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${old}" CASCADE`);
    }
  }, 60_000);
});
