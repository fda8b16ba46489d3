/**
 * Memories written by a release before the Redis store kept `<prefix>m:owners` (the set export and
 * migrate enumerate) are found anyway: the first listing of owners walks the memory keys once and
 * adds their owners, and a marker key keeps later stores from walking again. "The old way" here is a
 * memory written by the store with its owners entry and marker removed afterwards, which leaves
 * exactly the keys an older release wrote.
 */
import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FullStore } from "../../src/core/types.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { createRedisStore } from "../../src/stores/redis/index.js";
import { migrateStores } from "../../src/transfer/migrate.js";
import { serviceAvailable, TEST_REDIS_URL } from "../_services.js";

const enabled = await serviceAvailable("redis");

describe.skipIf(enabled !== true)("redis: owners of memories written before the owners set", () => {
  const raw = createClient({ url: TEST_REDIS_URL });
  // Glob characters in the prefix: SCAN's pattern must match them literally.
  const keyPrefix = `tk-test-${randomUUID()}[*?]:`;
  // A store of another prefix that starts like this one: its memories are not this store's.
  const otherPrefix = `${keyPrefix}x:`;
  const stores: FullStore[] = [];
  const open = (prefix = keyPrefix) => {
    const s = createRedisStore({ url: TEST_REDIS_URL, keyPrefix: prefix, ttlMs: 0 });
    stores.push(s);
    return s;
  };
  /** Makes the store's keys look as an older release left them: no owners set, no marker. */
  const forgetOwners = async (prefix = keyPrefix) => {
    await raw.del([`${prefix}m:owners`, `${prefix}m:owners:complete`]);
  };

  beforeAll(async () => {
    await raw.connect();
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    const keys: string[] = [];
    const escaped = keyPrefix.replace(/[*?[\]\\]/g, "\\$&");
    for await (const batch of raw.scanIterator({ MATCH: `${escaped}*`, COUNT: 1000 })) keys.push(...batch);
    if (keys.length > 0) await raw.del(keys);
    await raw.close();
  });

  it("finds them on the first listing, once, and migrate carries them", async () => {
    const writer = open();
    // 260 owners: more than one listing page (SCAN batches depend on the whole database).
    const users = Array.from({ length: 260 }, (_, i) => `old-${String(i).padStart(4, "0")}`);
    for (let i = 0; i < users.length; i += 100) {
      await Promise.all(
        users.slice(i, i + 100).map((userId) => writer.addUserMemory({ userId, text: `fact of ${userId}` })),
      );
    }
    // One owner with two memories, one edited: its history must arrive too.
    const edited = await writer.addUserMemory({ userId: "old-0000", text: "second" });
    await writer.updateUserMemory("old-0000", edited.id, { text: "second, edited" });
    await open(otherPrefix).addUserMemory({ userId: "someone-else", text: "not this store's" });
    await forgetOwners();
    await forgetOwners(otherPrefix);
    expect(await raw.zCard(`${keyPrefix}m:owners`)).toBe(0);

    // A store opened afterwards (as after an upgrade) lists every owner, in id order, across pages.
    const store = open();
    const listed: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await store.listMemoryOwners({ limit: 100, cursor });
      listed.push(...page.userIds);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    expect(listed).toEqual(users);
    expect(await raw.exists(`${keyPrefix}m:owners:complete`)).toBe(1);

    // The marker stops a later store from walking again: an owner removed from the set stays out
    // (the walk would have put it back), which is how the test sees that no second walk ran.
    await raw.zRem(`${keyPrefix}m:owners`, "old-0001");
    expect((await open().listMemoryOwners({ limit: 2 })).userIds).toEqual(["old-0000", "old-0002"]);
    await raw.zAdd(`${keyPrefix}m:owners`, { score: 0, value: "old-0001" });

    // Whole-store migrate (which enumerates owners) carries every memory, history included.
    await forgetOwners();
    const target = createMemoryStore();
    const report = await migrateStores(open(), target);
    expect(report.problems).toEqual([]);
    expect(report.memories.created).toBe(users.length + 1);
    expect(report.verification).toMatchObject({ memories: users.length + 1, memoriesOk: users.length + 1 });
    const moved = await target.getUserMemory("old-0000", edited.id);
    expect(moved?.text).toBe("second, edited");
    expect(moved?.history?.map((h) => h.text)).toEqual(["second"]);
    expect((await target.listMemoryOwners({ limit: 10 })).userIds).not.toContain("someone-else");
  }, 60_000);

  it("fails, naming the key, on a memory it cannot read instead of leaving its owner out", async () => {
    const prefix = `${keyPrefix}bad:`;
    const store = open(prefix);
    await store.addUserMemory({ userId: "u", text: "ok" });
    await forgetOwners(prefix);
    const [dataKey] = await raw.keys(`${prefix.replace(/[*?[\]\\]/g, "\\$&")}m:{*}:data`);
    await raw.hSet(dataKey, "broken", "{not json");
    await expect(open(prefix).listMemoryOwners()).rejects.toMatchObject({ code: "store_corrupt" });
    expect(await raw.exists(`${prefix}m:owners:complete`)).toBe(0);
  });
});
