/**
 * The activity time off the session row's indexes (PostgreSQL schema version 12,
 * `postgres/_activity.ts`): the indexes hold `activity_floor`, which lags the exact time by less than
 * a step; listing and expiry still follow the exact time, and every writer keeps the floor right.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { ACTIVITY_FLOOR_STEP_MS } from "../../src/stores/postgres/_activity.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { atSchemaVersion } from "./_postgres-old-schema.js";

const enabled = await serviceAvailable("postgres");
const schema = `tk_test_${randomBytes(6).toString("hex")}`;
const extraSchemas: string[] = [];

describe.skipIf(enabled !== true)("postgres activity floor", () => {
  const store = createPostgresStore({ url: TEST_POSTGRES_URL, schema, poolSize: 2 });
  const admin = postgres(TEST_POSTGRES_URL, { max: 2, onnotice: () => {} });
  afterAll(async () => {
    await store.close();
    for (const name of [schema, ...extraSchemas]) await admin.unsafe(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
    await admin.end();
  });
  const floors = async (ids: string[], in_ = schema) =>
    admin<{ id: string; floor: number; at: number }[]>`
      SELECT id, activity_floor::float8 AS floor, last_activity_at::float8 AS at FROM ${admin(in_)}.sessions WHERE id = ANY(${ids}::text[])`;

  it("lists by exact activity, page by page, where the floors say otherwise", async () => {
    const owner = `u-${randomBytes(4).toString("hex")}`;
    const base = Date.now() - 3 * ACTIVITY_FLOOR_STEP_MS;
    // Floors ascending with the index i; appends then in the reverse order, each within a step of its
    // floor, so the exact order is the reverse of the floors'.
    const ids: string[] = [];
    for (let i = 0; i < 8; i++)
      ids.push(
        (await store.createSession({ id: newSessionId(), userId: owner, lastActivityAt: Date.now() - 1000 + i * 10 }))
          .id,
      );
    await store.createSession({ id: newSessionId(), userId: owner, lastActivityAt: base });
    for (const id of [...ids].reverse()) {
      await store.appendMessages(id, [{ role: "user", content: "hi" }]);
      await new Promise((r) => setTimeout(r, 3));
    }
    const rows = await floors(ids);
    for (const r of rows) {
      expect(r.floor).toBeLessThanOrEqual(r.at);
      expect(r.at - r.floor).toBeLessThan(ACTIVITY_FLOOR_STEP_MS);
    }
    // Floors unmoved by the appends (HOT updates): still ascending with i.
    const byFloor = [...rows].sort((a, b) => b.floor - a.floor).map((r) => r.id);
    expect(byFloor).toEqual([...ids].reverse());
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await store.listSessions(owner, { limit: 3, cursor });
      seen.push(...page.sessions.map((s) => s.id));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen.slice(0, 8)).toEqual(ids);
    expect(seen).toHaveLength(9);
  });

  it("moves the floor when the activity leaves its step, backwards too, and expires by the exact time", async () => {
    const id = (await store.createSession({ id: newSessionId(), userId: "floor" })).id;
    const other = (await store.createSession({ id: newSessionId(), userId: "floor" })).id;
    const old = Date.now() - 10 * ACTIVITY_FLOOR_STEP_MS;
    await store.touchSession(id, old);
    await store.touchSession(other, old);
    expect((await floors([id]))[0]).toMatchObject({ floor: old, at: old });
    // Within a step: the floor stays; past it: the floor follows.
    await store.touchSession(id, old + ACTIVITY_FLOOR_STEP_MS - 1);
    expect((await floors([id]))[0]).toMatchObject({ floor: old, at: old + ACTIVITY_FLOOR_STEP_MS - 1 });
    await store.appendMessages(id, [{ role: "user", content: "back" }]);
    const [moved] = await floors([id]);
    expect(moved.floor).toBe(moved.at);
    expect(moved.at).toBeGreaterThan(Date.now() - 60_000);
    // `other` keeps its old floor but is active now, within a step of a cut-off just past `old`.
    await store.touchSession(other, old + ACTIVITY_FLOOR_STEP_MS / 2);
    expect((await floors([other]))[0].floor).toBe(old);
    expect(await store.expire(old + ACTIVITY_FLOOR_STEP_MS / 4)).not.toContain(other);
    expect(await store.expire(old + ACTIVITY_FLOOR_STEP_MS)).toContain(other);
    expect(await store.getSession(id)).not.toBeNull();
  });

  it("upgrades a version 11 schema: floors from the activity times, and an older process's writes keep them right", async () => {
    const old = `tk_test_${randomBytes(6).toString("hex")}`;
    extraSchemas.push(old);
    const [a, b, c] = [newSessionId(), newSessionId(), newSessionId()];
    const now = Date.now();
    await atSchemaVersion(old, 11, async (sql) => {
      await sql`INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (${a}, 'old', 0, ${now - 5000}), (${b}, 'old', 0, ${now - 4000})`;
    });
    const upgraded = createPostgresStore({ url: TEST_POSTGRES_URL, schema: old, poolSize: 2 });
    try {
      expect((await upgraded.listSessions("old")).sessions.map((s) => s.id)).toEqual([b, a]);
      expect((await floors([a, b], old)).map((r) => r.floor - r.at)).toEqual([0, 0]);
      // What a version 11 process sends: a session row without a floor, an activity time moved back.
      await atSchemaVersion(old, 12, async (sql) => {
        await sql`INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (${c}, 'old', 0, ${now - 3000})`;
        await sql`UPDATE sessions SET last_activity_at = ${now - 20 * ACTIVITY_FLOOR_STEP_MS} WHERE id = ${a}`;
      });
      for (const r of await floors([a, c], old)) expect(r.floor).toBe(r.at);
      expect((await upgraded.listSessions("old")).sessions.map((s) => s.id)).toEqual([c, b, a]);
      expect(await upgraded.expire(now - 10 * ACTIVITY_FLOOR_STEP_MS)).toEqual([a]);
    } finally {
      await upgraded.close();
    }
  });
});
