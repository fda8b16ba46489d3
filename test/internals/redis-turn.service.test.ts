/**
 * The Redis store's two-round-trip turn beyond the shared conformance section: a commit that releases
 * the lease is safe against a late renew of it, wakes the next waiter by name as a release does, and
 * (on a single Redis) records the session's activity in its indexes in the same script.
 */
import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { FullStore, TurnOpening } from "../../src/core/types.js";
import { createRedisStore, type RedisStoreOptions } from "../../src/stores/redis/index.js";
import { keysExpireAt } from "../../src/stores/redis/_scripts.js";
import { serviceAvailable, TEST_REDIS_URL } from "../_services.js";
import { until } from "../_wait.js";

const enabled = await serviceAvailable("redis");
const keyPrefix = `tk-turn-${randomUUID()}:`;
const say = (content: string) => ({ role: "user" as const, content });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(enabled !== true)("redis turns", () => {
  const raw = createClient({ url: TEST_REDIS_URL });
  const stores: FullStore[] = [];
  const store = (extra: Partial<RedisStoreOptions> = {}) => {
    const s = createRedisStore({ url: TEST_REDIS_URL, keyPrefix, ttlMs: 0, ...extra });
    stores.push(s);
    return s;
  };
  const key = (id: string, name: string) => `${keyPrefix}s:{${id}}:${name}`;
  const opening = (userId: string): TurnOpening => ({
    owner: { userId },
    last: 10,
    lease: { ttlMs: 10_000, waitMs: 5_000 },
  });
  const setup = async (s: FullStore) => {
    const owner = `owner-${randomUUID()}`;
    const { id } = await s.createSession({ id: newSessionId(), userId: owner });
    await s.appendMessages(id, [say("m1")]);
    return { owner, id };
  };

  beforeAll(async () => {
    await raw.connect();
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    const keys: string[] = [];
    for await (const batch of raw.scanIterator({ MATCH: `${keyPrefix}*`, COUNT: 1000 })) keys.push(...batch);
    for (let i = 0; i < keys.length; i += 500) await raw.del(keys.slice(i, i + 500));
    await raw.close();
  });

  it("a renew sent after the commit that released the lease does not take it back", async () => {
    const s = store();
    const other = store();
    const { owner, id } = await setup(s);
    // A first turn loads the scripts, so the counted commit is not resent after a NOSCRIPT.
    const warm = await s.openTurn!(id, opening(owner));
    await s.appendMessages(id, [say("warm")], { fence: warm.lease.fence, releaseLease: true });

    const turn = await s.openTurn!(id, opening(owner));
    const commit = s.appendMessages(id, [say("q")], { fence: turn.lease.fence, releaseLease: true });
    // Sent on the same connection after the commit: it reaches Redis once the lease is released.
    const renewed = turn.lease.renew(10_000);
    await commit;
    expect(await renewed).toBe(false);
    expect(await raw.exists(key(id, "lease"))).toBe(0);
    const next = await other.acquireLease(id, { waitMs: 100 });
    expect(next.fence).toBeGreaterThan(turn.lease.fence);
    // The holder's own release afterwards neither fails nor frees the next holder.
    await turn.lease.release();
    expect(await raw.get(key(id, "lease"))).not.toBeNull();
    await next.release();
  });

  it("a commit that releases the lease names the next waiter on the wake channel, as a release does", async () => {
    const s = store();
    const elsewhere = store();
    const { owner, id } = await setup(s);
    const listener = raw.duplicate();
    await listener.connect();
    const woken: string[] = [];
    await listener.sSubscribe(key(id, "wake"), (message) => woken.push(message));
    const queue = key(id, "queue");
    const inLine = (n: number) => async () => (await raw.zCard(queue)) === n;
    const headOfLine = async () => (await raw.zRange(queue, 0, 0))[0];
    try {
      const turn = await s.openTurn!(id, opening(owner));
      // Two waiters of another store, the second sent once the first is in line: the first in line is the one to wake.
      const first = elsewhere.openTurn!(id, opening(owner));
      await until("the first waiter is in line", inLine(1));
      const second = elsewhere.openTurn!(id, opening(owner));
      await until("the second waiter is in line", inLine(2));
      const head = await headOfLine();
      await s.appendMessages(id, [say("from the first turn")], { fence: turn.lease.fence, releaseLease: true });
      const a = await first;
      // The message comes on the listener's own connection: nothing orders it before the grant's reply.
      await until("the commit's wake message arrived", () => woken.length > 0);
      expect(woken).toEqual([head]);
      expect(a.messages.map((m) => m.content)).toEqual(["m1", "from the first turn"]);
      const next = await headOfLine();
      await elsewhere.appendMessages(id, [say("from the second")], { fence: a.lease.fence, releaseLease: true });
      const b = await second;
      await until("the second commit's wake message arrived", () => woken.length > 1);
      expect(woken).toEqual([head, next]);
      expect(b.messages.map((m) => m.content)).toEqual(["m1", "from the first turn", "from the second"]);
      await b.lease.release();
    } finally {
      await listener.close();
    }
  });

  it("a commit with a fence of a lease this store does not hold, or a failing write, releases nothing", async () => {
    const s = store();
    const other = store();
    const { owner, id } = await setup(s);
    const turn = await s.openTurn!(id, opening(owner));
    // Another process writing with this fence (it holds no token for it) cannot release the lease.
    await other.appendMessages(id, [say("fenced elsewhere")], { fence: turn.lease.fence, releaseLease: true });
    expect(await raw.get(key(id, "lease"))).not.toBeNull();
    await expect(
      s.replaceAfter(id, 0, [say("x")], { fence: turn.lease.fence, expectedLastSeq: 1, releaseLease: true }),
    ).rejects.toMatchObject({ code: "history_conflict" });
    expect(await raw.get(key(id, "lease"))).not.toBeNull();
    expect(await turn.lease.renew(10_000)).toBe(true);
    await turn.lease.release();
    expect(await raw.exists(key(id, "lease"))).toBe(0);
  });

  it("a commit records the session's activity in its owner's and the global indexes, expiring with it", async () => {
    const ttlMs = 60_000;
    const s = store({ ttlMs });
    const { owner, id } = await setup(s);
    const older = await s.createSession({ id: newSessionId(), userId: owner });
    const turn = await s.openTurn!(id, opening(owner));
    await sleep(5);
    await s.createSession({ id: newSessionId(), userId: owner, lastActivityAt: Date.now() - 1 });
    await s.appendMessages(id, [say("q"), { role: "assistant", content: "a" }], {
      fence: turn.lease.fence,
      releaseLease: true,
    });
    const session = (await s.getSession(id))!;
    expect(await raw.zScore(`${keyPrefix}u:${owner}:sessions`, id)).toBe(session.lastActivityAt);
    expect(await raw.zScore(`${keyPrefix}{index}:activity`, id)).toBe(session.lastActivityAt);
    expect(await raw.zScore(`${keyPrefix}{index}:ids`, id)).toBe(0);
    // The session's keys outlive its activity by the TTL (and at most a margin), its owner's index outlives its keys.
    const keysExpire = await raw.pExpireTime(key(id, "meta"));
    expect(keysExpire).toBeGreaterThanOrEqual(session.lastActivityAt + ttlMs);
    expect(keysExpire).toBeLessThanOrEqual(keysExpireAt(session.lastActivityAt, ttlMs));
    expect(await raw.pExpireTime(`${keyPrefix}u:${owner}:sessions`)).toBeGreaterThanOrEqual(keysExpire);
    const listed = (await s.listSessions(owner)).sessions.map((x) => x.id);
    expect(listed[0]).toBe(id);
    expect(listed).toContain(older.id);
    // An owner-scoped append (the library's common case) takes the same one-script path.
    await sleep(5);
    await s.appendMessages(older.id, [say("later")], { owner: { userId: owner } });
    expect((await s.listSessions(owner)).sessions[0].id).toBe(older.id);
  });
});
