/**
 * PostgreSQL schema version 22 (`migrations/022-lean-append.ts`): the append's fewer statements, the
 * activity floor moved by an `AFTER UPDATE` trigger, and messages deleted with their session by a
 * trigger instead of a foreign key. What must hold after an upgrade from version 21 with data: a
 * turn's append of two messages (fenced, releasing) and appends of one and three messages number
 * their rows as before; the floor still follows the activity time once it leaves its window; deleting
 * a session deletes its messages and their vectors, and its owner's term statistics equal a recount.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { ACTIVITY_FLOOR_STEP_MS } from "../../src/stores/postgres/_activity.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { atSchemaVersion } from "./_postgres-old-schema.js";

const enabled = await serviceAvailable("postgres");
const text = (content: string) => ({ role: "user" as const, content });

describe.skipIf(enabled !== true)("postgres: the leaner append of schema version 22", () => {
  it("upgrades a version 21 schema: appends, the floor and a session's deletion behave as before", async () => {
    const schema = `tk_test_${randomBytes(6).toString("hex")}`;
    const owner = `dana-${randomBytes(4).toString("hex")}`;
    const sql = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
    try {
      await atSchemaVersion(schema, 21, async (old) => {
        await old`INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES ('s1', ${owner}, 0, threadkeep_now_ms())`;
        await old`SELECT out_status FROM threadkeep_append_scoped('s1', ARRAY['{"role":"user","content":"otters"}'], ARRAY['otters'],
          NULL::bigint, false, NULL::bigint, NULL::text, false, 'english'::regconfig, ${owner}::text, 0::bigint)`;
      });
      const store = createPostgresStore({ url: TEST_POSTGRES_URL, schema, poolSize: 2, searchIndexDelayMs: 60_000 });
      try {
        const turn = await store.openTurn!("s1", { owner: { userId: owner }, last: 20 });
        expect(turn.status).toBe("ok");
        const added = await store.appendMessages("s1", [text("a heron"), text("two herons")], {
          fence: turn.lease.fence,
          owner: { userId: owner },
          releaseLease: true,
          maxMessages: 200,
          keepUnsummarized: true,
        });
        expect(added.map((m) => m.seq)).toEqual([2, 3]);
        // The lease was given back with the write: the next turn is granted at once.
        const next = await store.openTurn!("s1", { owner: { userId: owner }, last: 20 });
        expect(next.messages.map((m) => m.content)).toEqual(["otters", "a heron", "two herons"]);
        await store.appendMessages("s1", [text("one")], { fence: next.lease.fence, releaseLease: true });
        await store.appendMessages("s1", [text("x"), text("y"), text("z")], { maxMessages: 5 });
        expect((await store.getMessages("s1")).map((m) => m.seq)).toEqual([3, 4, 5, 6, 7]);

        // A session last active two steps ago: the next append moves its floor to the activity time.
        const ago = 2 * ACTIVITY_FLOOR_STEP_MS;
        await sql`UPDATE sessions SET last_activity_at = last_activity_at - ${ago}, activity_floor = last_activity_at - ${ago} WHERE id = 's1'`;
        await store.appendMessages("s1", [text("later")]);
        const [row] = await sql<
          { same: boolean }[]
        >`SELECT activity_floor = last_activity_at AS same FROM sessions WHERE id = 's1'`;
        expect(row.same).toBe(true);
        const [kept] = await sql<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_constraint WHERE conname = 'messages_session_id_fkey' AND connamespace = ${schema}::regnamespace`;
        expect(kept.n).toBe(0);

        const [last] = await store.getMessages("s1", { last: 1 });
        await store.putEmbeddings("s1", "m", [{ seq: last.seq, createdAt: last.createdAt, vector: [1, 0] }]);
        expect(await sql`SELECT 1 FROM message_vectors WHERE session_id = 's1'`).toHaveLength(1);
        await sql`SELECT threadkeep_index_pending('english', 100000)`;
        await store.deleteSession("s1");
        expect(await sql`SELECT 1 FROM messages WHERE session_id = 's1'`).toHaveLength(0);
        expect(await sql`SELECT 1 FROM message_vectors WHERE session_id = 's1'`).toHaveLength(0);
        await sql`SELECT threadkeep_index_pending('english', 100000)`;
        const [stats] = await sql<{ docs: number }[]>`SELECT docs::int FROM owner_stats WHERE user_id = ${owner}`;
        expect(stats.docs).toBe(0);
        expect(await sql`SELECT 1 FROM term_stats WHERE user_id = ${owner} AND df <> 0`).toHaveLength(0);
      } finally {
        await store.close();
      }
    } finally {
      await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await sql.end();
    }
  }, 60_000);
});
