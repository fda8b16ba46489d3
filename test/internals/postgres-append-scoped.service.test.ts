/**
 * Schema version 15 (`postgres/migrations/015-scoped-append.ts`): the append checks the owner on the session row it
 * updates rather than in the calling statement, and inserts one message by `VALUES`. What must hold:
 * another owner, or an expired session, gets `session_not_found` with nothing written, a fenced write
 * included (a lease refusal tells another owner nothing); one message keeps the cap; and a version 14
 * process (`threadkeep_append_fenced` under an owner `EXISTS`) appends beside it on one session.
 */
import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { Message } from "../../src/core/types.js";
import { SCHEMA_VERSION } from "../../src/stores/postgres/_schema.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { expectCode } from "../../src/testing/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { atSchemaVersion } from "./_postgres-old-schema.js";
import { dropSchemas, postgresStoresInSchema, uniqueSchema } from "../stores/_postgres-stores.js";

const enabled = await serviceAvailable("postgres");
const text = (content: string) => ({ role: "user" as const, content });
const contents = (messages: Message[]) => messages.map((m) => m.content);

describe.runIf(enabled === true)("postgres: the owner-scoped append of schema version 15", () => {
  // The background indexer a delay after the write (200 ms by default) would race the check that a
  // one-message append leaves its row unindexed: on a loaded machine the append and the check take
  // longer than that. Nothing else here searches, so the indexer waits longer than the file lasts.
  const { admin, store, other } = postgresStoresInSchema({ searchIndexDelayMs: 10 * 60_000 });

  it("refuses another owner and an expired session with session_not_found, writing nothing", async () => {
    const id = newSessionId();
    await store.createSession({ id, userId: "alice" });
    await store.appendMessages(id, [text("mine")], { owner: { userId: "alice" } });
    await expectCode(
      store.appendMessages(id, [text("intrusion")], { owner: { userId: "mallory" } }),
      "session_not_found",
    );
    await expectCode(
      store.appendMessages(id, [text("a"), text("b")], { owner: { userId: "mallory" }, maxMessages: 200 }),
      "session_not_found",
    );
    await expectCode(
      store.appendMessages(id, [text("late")], { owner: { userId: "alice", activeSince: Date.now() + 60_000 } }),
      "session_not_found",
    );
    expect(contents(await store.getMessages(id))).toEqual(["mine"]);
    const [session] = await admin<
      { last_seq: number }[]
    >`SELECT last_seq::integer AS last_seq FROM sessions WHERE id = ${id}`;
    expect(session.last_seq).toBe(1);
  });

  it("answers a fenced write of another owner session_not_found, the owner's stale fence lease_expired", async () => {
    const id = newSessionId();
    await store.createSession({ id, userId: "alice" });
    const stale = await store.acquireLease(id, { ttlMs: 10_000 });
    await stale.release();
    const held = await other.acquireLease(id, { ttlMs: 10_000 });
    try {
      // The refused lease must not tell mallory that alice's session exists.
      await expectCode(
        store.appendMessages(id, [text("x")], { fence: stale.fence, owner: { userId: "mallory" } }),
        "session_not_found",
      );
      await expectCode(
        store.appendMessages(id, [text("x")], { fence: stale.fence, owner: { userId: "alice" } }),
        "lease_expired",
      );
      await expectCode(
        other.appendMessages(id, [text("x")], { fence: held.fence, owner: { userId: "mallory" } }),
        "session_not_found",
      );
      const [added] = await other.appendMessages(id, [text("held")], { fence: held.fence, owner: { userId: "alice" } });
      expect(added.seq).toBe(1);
      expect(contents(await store.getMessages(id))).toEqual(["held"]);
    } finally {
      await held.release();
    }
  });

  it("caps one-message appends as it caps batches, and keeps what summaries do not reach", async () => {
    const id = newSessionId();
    await store.createSession({ id, userId: "u" });
    for (let i = 1; i <= 5; i++)
      await store.appendMessages(id, [text(`m${i}`)], { maxMessages: 3, owner: { userId: "u" } });
    expect((await store.getMessages(id)).map((m) => m.seq)).toEqual([3, 4, 5]);
    // With keepUnsummarized nothing past the summaries goes: none cover seq 3 yet.
    await store.appendMessages(id, [text("m6")], { maxMessages: 3, keepUnsummarized: true, owner: { userId: "u" } });
    expect((await store.getMessages(id)).map((m) => m.seq)).toEqual([3, 4, 5, 6]);
    await store.saveSummary(id, { fromSeq: 3, toSeq: 4, content: "s" });
    await store.appendMessages(id, [text("m7")], { maxMessages: 3, keepUnsummarized: true });
    expect((await store.getMessages(id)).map((m) => m.seq)).toEqual([5, 6, 7]);
    // A one-message append is indexed later, as before: its row waits with a NULL tsvector.
    const [row] = await admin<
      { pending: boolean }[]
    >`SELECT tsv IS NULL AS pending FROM messages WHERE session_id = ${id} AND seq = 7`;
    expect(row.pending).toBe(true);
  });
});

describe.runIf(enabled === true)("postgres: upgrading a version 14 schema to 15", () => {
  it("creates threadkeep_append_scoped, and a version 14 process's appends interleave with this version's", async () => {
    const old = uniqueSchema();
    const id = newSessionId();
    const say = (content: string) => JSON.stringify({ role: "user", content });
    // What a version 14 process sends for an owner-scoped append of one message.
    const oldAppend = (sql: postgres.Sql, content: string, owner: string) => sql<{ out_status: string }[]>`
      SELECT out_status FROM threadkeep_append_fenced(${id}, ${[say(content)]}::text[], ${[content]}::text[], 200::bigint, false,
        NULL::bigint, NULL::text, false, NULL::regconfig)
      WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ${id} AND user_id = ${owner} AND last_activity_at >= ${Number.MIN_SAFE_INTEGER}::bigint)`;
    const v14 = postgres(TEST_POSTGRES_URL, { max: 4, onnotice: () => {}, connection: { search_path: old } });
    const after = createPostgresStore({ url: TEST_POSTGRES_URL, schema: old, poolSize: 4 });
    try {
      await atSchemaVersion(old, 14, async (sql) => {
        expect(
          await sql`SELECT 1 FROM pg_proc WHERE proname = 'threadkeep_append_scoped' AND pronamespace = current_schema()::regnamespace`,
        ).toHaveLength(0);
        await sql`INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (${id}, 'u', 0, threadkeep_now_ms())`;
        expect((await oldAppend(sql, "old 1", "u"))[0].out_status).toBe("ok");
      });
      await after.appendMessages(id, [text("new 1")], { maxMessages: 200, owner: { userId: "u" } });
      expect(
        await v14`SELECT 1 FROM pg_proc WHERE proname = 'threadkeep_append_scoped' AND pronamespace = current_schema()::regnamespace`,
      ).toHaveLength(1);
      await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          i % 2 === 0
            ? oldAppend(v14, `old ${2 + i}`, "u").then(([row]) => expect(row.out_status).toBe("ok"))
            : after.appendMessages(id, [text(`new ${2 + i}`)], { maxMessages: 200, owner: { userId: "u" } }),
        ),
      );
      expect((await after.getMessages(id)).map((m) => m.seq)).toEqual(Array.from({ length: 42 }, (_, i) => i + 1));
      // Version 14's statement still refuses another owner by its EXISTS: no row, nothing written.
      expect(await oldAppend(v14, "intrusion", "mallory")).toHaveLength(0);
      expect(await after.countMessages(id)).toBe(42);
      const versions = await v14`SELECT version FROM threadkeep_migrations ORDER BY version`;
      expect(versions.map((v) => v.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
      expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(15);
    } finally {
      await after.close();
      await v14.end();
      await dropSchemas(old);
    }
  });
});
