import { randomUUID } from "node:crypto";
import { connect, createServer, type Server, type Socket } from "node:net";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isThreadkeepError } from "../../src/core/errors.js";
import { newSessionId } from "../../src/core/ids.js";
import type { FullStore } from "../../src/core/types.js";
import { createRedisStore, type RedisStoreOptions } from "../../src/stores/redis/index.js";
import { serviceAvailable, TEST_REDIS_URL } from "../_services.js";
import { expectTwoProcessTurnOrder } from "./_two-process-turns.js";
import { expectCode, runStoreConformance } from "../../src/testing/index.js";

const enabled = await serviceAvailable("redis");
const keyPrefix = `tk-test-${randomUUID()}:`;
const open = (extra: Partial<RedisStoreOptions> = {}) => createRedisStore({ url: TEST_REDIS_URL, keyPrefix, ...extra });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// TTL off for the shared suite: it plants sessions with activity times days (or decades) in the past,
// which a store measuring expiry from the last activity drops at once. Native expiry is tested below.
runStoreConformance("redis", () => open({ ttlMs: 0 }), { enabled, withTtl: (ttlMs) => open({ ttlMs }) });

describe.skipIf(enabled !== true)("redis store specifics", () => {
  const raw = createClient({ url: TEST_REDIS_URL });
  const stores: FullStore[] = [];
  const store = (extra: Partial<RedisStoreOptions> = {}) => {
    const s = open(extra);
    stores.push(s);
    return s;
  };
  const keysOf = async (pattern: string) => {
    const found: string[] = [];
    for await (const batch of raw.scanIterator({ MATCH: pattern, COUNT: 1000 })) found.push(...batch);
    return found;
  };

  beforeAll(async () => {
    await raw.connect();
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    // No FLUSHDB: other test files share the server. Only this file's prefix goes.
    const keys = await keysOf(`${keyPrefix}*`);
    for (let i = 0; i < keys.length; i += 500) await raw.del(keys.slice(i, i + 500));
    await raw.close();
  });

  it("keeps every key of a session under one hash tag", async () => {
    const s = store({ ttlMs: 0 });
    const session = await s.createSession({ id: newSessionId(), userId: "tagger" });
    await s.appendMessages(session.id, [{ role: "user", content: "hi" }]);
    await s.saveSummary(session.id, { fromSeq: 1, toSeq: 1, content: "greeting" });
    await s.setState(session.id, { k: 1 }, 0);
    const lease = await s.acquireLease(session.id);
    const waiting = s.acquireLease(session.id, { waitMs: 5_000 });
    await sleep(20);
    const keys = await keysOf(`${keyPrefix}s:*${session.id}*`);
    await lease.release();
    await (await waiting).release();
    // The hash tag is the text between the first "{" and the next "}".
    const tags = new Set(keys.map((key) => /\{([^}]*)\}/.exec(key)?.[1]));
    expect(keys.length).toBeGreaterThanOrEqual(8);
    expect([...tags]).toEqual([session.id]);
  });

  it("expires a session's keys by themselves and leaves no phantom in the listing", async () => {
    const s = store({ ttlMs: 1000 });
    const owner = `owner-${randomUUID()}`;
    const gone = await s.createSession({ id: newSessionId(), userId: owner });
    await s.appendMessages(gone.id, [{ role: "user", content: "soon forgotten" }]);
    await s.setState(gone.id, { a: 1 }, 0);
    await s.saveSummary(gone.id, { fromSeq: 1, toSeq: 1, content: "x" });
    const ttls = await Promise.all((await keysOf(`${keyPrefix}s:{${gone.id}}:*`)).map((k) => raw.pTTL(k)));
    for (const ttl of ttls) expect(ttl).toBeGreaterThan(0);
    expect((await s.listSessions(owner)).sessions.map((x) => x.id)).toEqual([gone.id]);
    await sleep(1300);
    // Redis removed the keys itself: no call to expire() happened.
    expect(await raw.exists(`${keyPrefix}s:{${gone.id}}:meta`)).toBe(0);
    expect(await raw.exists(`${keyPrefix}s:{${gone.id}}:msgs`)).toBe(0);
    expect(await s.getSession(gone.id)).toBeNull();
    expect(await s.getMessages(gone.id)).toEqual([]);
    expect(await s.listSessions(owner)).toEqual({ sessions: [], nextCursor: null });
    expect(await s.search({ userId: owner, text: "forgotten" })).toEqual([]);
  });

  it("hides a session past its TTL while Redis keeps its keys for the margin, and does not revive it", async () => {
    const ttlMs = 60_000;
    const s = store({ ttlMs });
    const owner = `lapsed-${randomUUID()}`;
    // Inactive just past the TTL: its keys expire a tenth of the TTL later (about 5 s from now).
    const lapsed = await s.createSession({
      id: newSessionId(),
      userId: owner,
      lastActivityAt: Date.now() - ttlMs - 1_000,
    });
    const live = await s.createSession({ id: newSessionId(), userId: owner });
    expect(await raw.exists(`${keyPrefix}s:{${lapsed.id}}:meta`)).toBe(1);
    expect(await s.getSession(lapsed.id)).toBeNull();
    expect((await s.listSessions(owner)).sessions.map((x) => x.id)).toEqual([live.id]);
    const all = (await s.listAllSessions({ limit: 10_000 })).sessions.map((x) => x.id);
    expect(all).toContain(live.id);
    expect(all).not.toContain(lapsed.id);
    await expectCode(s.appendMessages(lapsed.id, [{ role: "user", content: "too late" }]), "session_not_found");
    await expectCode(s.touchSession(lapsed.id), "session_not_found");
    expect(await s.getSession(lapsed.id)).toBeNull();
    expect(await raw.exists(`${keyPrefix}s:{${lapsed.id}}:msgs`)).toBe(0);
    expect(await s.appendMessages(live.id, [{ role: "user", content: "in time" }])).toHaveLength(1);
  });

  it("refreshes the TTL on activity", async () => {
    const s = store({ ttlMs: 2000 });
    const owner = `active-${randomUUID()}`;
    const session = await s.createSession({ id: newSessionId(), userId: owner });
    const started = Date.now();
    for (let i = 0; i < 5; i++) {
      await sleep(500);
      if (i === 4) await s.touchSession(session.id);
      else await s.appendMessages(session.id, [{ role: "user", content: `still here ${i}` }]);
    }
    // Past one TTL since creation, yet never a TTL without activity.
    expect(Date.now() - started).toBeGreaterThan(2000);
    expect(await s.countMessages(session.id)).toBe(4);
    expect((await s.listSessions(owner)).sessions.map((x) => x.id)).toEqual([session.id]);
    const ttl = await raw.pTTL(`${keyPrefix}s:{${session.id}}:msgs`);
    expect(ttl).toBeGreaterThan(1000);
    // The TTL and its margin (a tenth of it, see keysExpireAt).
    expect(ttl).toBeLessThanOrEqual(2200);
  });

  it("moves the keys' expiry once per margin of activity, never letting a key of a live session expire", async () => {
    const ttlMs = 1000;
    const s = store({ ttlMs });
    const owner = `margin-${randomUUID()}`;
    const session = await s.createSession({ id: newSessionId(), userId: owner });
    const key = (name: string) => `${keyPrefix}s:{${session.id}}:${name}`;
    const ownerIndex = `${keyPrefix}u:${owner}:sessions`;
    await s.appendMessages(session.id, [{ role: "user", content: "first" }], { owner: { userId: owner } });
    // Within the margin (a tenth of the TTL) the keys keep their expiry: the write does not move it.
    // Checked at a TTL of a minute (6 s of margin): at 1 s the margin is 100 ms, and a process stalled
    // that long between the two writes (122 ms once, in a full run on 2 cores) rightly moved it.
    const long = store({ ttlMs: 60_000 });
    const longOwner = `${owner}-long`;
    const kept = await long.createSession({ id: newSessionId(), userId: longOwner });
    const keptMeta = `${keyPrefix}s:{${kept.id}}:meta`;
    await long.appendMessages(kept.id, [{ role: "user", content: "first" }], { owner: { userId: longOwner } });
    const set = await raw.pExpireTime(keptMeta);
    await long.appendMessages(kept.id, [{ role: "user", content: "second" }], { owner: { userId: longOwner } });
    expect(await raw.pExpireTime(keptMeta)).toBe(set);
    expect(await raw.hGet(keptMeta, "expiresAt")).toBe(String(set));
    // Emptied, the list is made anew by the next append, and takes the session's expiry.
    await s.truncateAfter(session.id, 0);
    await s.appendMessages(session.id, [{ role: "user", content: "again" }], { owner: { userId: owner } });
    await s.setState(session.id, { k: 1 }, 0);
    let sent = 1;
    const started = Date.now();
    while (Date.now() - started < 1800) {
      // Every key of the session outlives its activity by the TTL, and its owner's index outlives the keys.
      const at = (await s.getSession(session.id))!.lastActivityAt;
      const expiries = await Promise.all(["meta", "msgs", "state"].map((name) => raw.pExpireTime(key(name))));
      for (const t of expiries) expect(t).toBeGreaterThanOrEqual(at + ttlMs);
      expect(await raw.pExpireTime(ownerIndex)).toBeGreaterThanOrEqual(Math.max(...expiries));
      await sleep(40);
      await s.appendMessages(session.id, [{ role: "user", content: `still here ${sent++}` }], {
        owner: { userId: owner },
      });
    }
    expect(await s.countMessages(session.id)).toBe(sent);
    expect((await s.getState(session.id)).data).toEqual({ k: 1 });
    expect((await s.listSessions(owner)).sessions.map((x) => x.id)).toEqual([session.id]);
  });

  it("moves the keys' expiry again after an earlier version's write set it short of the margin (an upgrade)", async () => {
    const ttlMs = 60_000;
    const s = store({ ttlMs });
    const owner = `upgrade-${randomUUID()}`;
    const session = await s.createSession({ id: newSessionId(), userId: owner });
    const key = (name: string) => `${keyPrefix}s:{${session.id}}:${name}`;
    await s.appendMessages(session.id, [{ role: "user", content: "by this version" }], { owner: { userId: owner } });
    // A process of the earlier version writes: it sets every key to its activity + ttl, and no expiresAt.
    const oldWrite = (await s.getSession(session.id))!.lastActivityAt + ttlMs;
    for (const name of ["meta", "msgs"]) await raw.pExpireAt(key(name), oldWrite);
    await sleep(5);
    for (const plain of [true, false]) {
      // The lean append and the full write (an operation id) alike see the keys expire too soon.
      await s.appendMessages(
        session.id,
        [{ role: "user", content: "later" }],
        plain ? { owner: { userId: owner } } : { owner: { userId: owner }, operationId: randomUUID() },
      );
      const at = (await s.getSession(session.id))!.lastActivityAt;
      for (const name of ["meta", "msgs"]) expect(await raw.pExpireTime(key(name))).toBeGreaterThanOrEqual(at + ttlMs);
      for (const name of ["meta", "msgs"]) await raw.pExpireAt(key(name), at + ttlMs - 1);
      await sleep(5);
    }
  });

  it("never undoes a newer write's index update with a creation's or an explicit touch's", async () => {
    const a = store({ ttlMs: 0 });
    const b = store({ ttlMs: 0 });
    const owner = `monotonic-${randomUUID()}`;
    const ownerIndex = `${keyPrefix}u:${owner}:sessions`;
    const activityIndex = `${keyPrefix}{index}:activity`;
    const scores = async (id: string) => [await raw.zScore(ownerIndex, id), await raw.zScore(activityIndex, id)];
    // A write to the new session whose own index update landed before the creation's.
    const id = newSessionId();
    const newer = Date.now() + 60_000;
    await raw.zAdd(ownerIndex, { score: newer, value: id });
    await raw.zAdd(activityIndex, { score: newer, value: id });
    await raw.zAdd(`${keyPrefix}{index}:ids`, { score: 0, value: id });
    await a.createSession({ id, userId: owner });
    expect(await scores(id)).toEqual([newer, newer]);
    // An explicit touch into the past racing another process's append: the entries end at what the
    // session's meta holds, whichever lands last.
    const raced = await a.createSession({ id: newSessionId(), userId: owner });
    for (let i = 0; i < 10; i++) {
      await Promise.all([
        a.touchSession(raced.id, Date.now() - 1000 - i),
        b.appendMessages(raced.id, [{ role: "user", content: `race ${i}` }], { owner: { userId: owner } }),
      ]);
      const deadline = Date.now() + 3000;
      let meta = (await b.getSession(raced.id))!.lastActivityAt;
      while ((await scores(raced.id)).some((score) => score !== meta) && Date.now() < deadline) {
        await sleep(50);
        meta = (await b.getSession(raced.id))!.lastActivityAt;
      }
      expect(await scores(raced.id)).toEqual([meta, meta]);
    }
    // Alone, an explicit touch still moves the session back in its indexes.
    const past = Date.now() - 5000;
    await a.touchSession(raced.id, past);
    expect(await scores(raced.id)).toEqual([past, past]);
  });

  it("never moves activity back on an append, in the session and in its indexes", async () => {
    const s = store({ ttlMs: 0 });
    const owner = `ahead-${randomUUID()}`;
    const session = await s.createSession({ id: newSessionId(), userId: owner });
    const ahead = Date.now() + 60_000.5;
    await s.touchSession(session.id, ahead);
    const [message] = await s.appendMessages(session.id, [{ role: "user", content: "hi" }], {
      owner: { userId: owner },
    });
    expect(message.seq).toBe(1);
    expect((await s.getSession(session.id))?.lastActivityAt).toBe(ahead);
    expect(await raw.hGet(`${keyPrefix}s:{${session.id}}:meta`, "lastActivityAt")).toBe(String(ahead));
    expect(await raw.zScore(`${keyPrefix}u:${owner}:sessions`, session.id)).toBe(ahead);
    expect(await raw.zScore(`${keyPrefix}{index}:activity`, session.id)).toBe(ahead);
    await s.touchSession(session.id, 1_000);
    await s.appendMessages(session.id, [{ role: "user", content: "now" }], { owner: { userId: owner } });
    const now = (await s.getSession(session.id))!.lastActivityAt;
    expect(now).toBeGreaterThan(ahead - 120_000);
    expect(await raw.zScore(`${keyPrefix}{index}:activity`, session.id)).toBe(now);
  });
  it("bounds the cap by the summaries' reach kept in the meta, and reads the summaries once for a session stored without it", async () => {
    const s = store({ ttlMs: 0 });
    const meta = (id: string) => `${keyPrefix}s:{${id}}:meta`;
    const texts = (n: number) => Array.from({ length: n }, (_, i) => ({ role: "user" as const, content: `m${i + 1}` }));
    const seqs = async (id: string) => (await s.getMessages(id)).map((m) => m.seq);
    const session = await s.createSession({ id: newSessionId(), userId: "u" });
    expect(await raw.hGet(meta(session.id), "sumTo")).toBe("0");
    await s.appendMessages(session.id, texts(10));
    await s.saveSummary(session.id, { fromSeq: 1, toSeq: 6, content: "1..6" });
    await s.saveSummary(session.id, { fromSeq: 1, toSeq: 3, content: "1..3" });
    expect(await raw.hGet(meta(session.id), "sumTo")).toBe("6");
    // Stored by a version without the field: the write reads the summaries and keeps their reach.
    await raw.hDel(meta(session.id), "sumTo");
    await s.appendMessages(session.id, [], { maxMessages: 2, keepUnsummarized: true });
    expect(await seqs(session.id)).toEqual([7, 8, 9, 10]);
    expect(await raw.hGet(meta(session.id), "sumTo")).toBe("6");
    await s.saveSummary(session.id, { fromSeq: 1, toSeq: 8, content: "1..8" });
    await s.appendMessages(session.id, [], { maxMessages: 1, keepUnsummarized: true });
    expect(await seqs(session.id)).toEqual([9, 10]);
  });

  it("heals the indexes where they outlived a session", async () => {
    const s = store({ ttlMs: 0 });
    const owner = `heal-${randomUUID()}`;
    const hourAgo = Date.now() - 3_600_000;
    const kept = await s.createSession({ id: newSessionId(), userId: owner, lastActivityAt: hourAgo - 1 });
    const lost = await s.createSession({ id: newSessionId(), userId: owner, lastActivityAt: hourAgo - 2 });
    const fresh = await s.createSession({ id: newSessionId(), userId: owner });
    // As if the keys expired (or the process died between the session write and the index write).
    await raw.del(`${keyPrefix}s:{${lost.id}}:meta`);
    expect((await s.listSessions(owner)).sessions.map((x) => x.id)).toEqual([fresh.id, kept.id]);
    expect(await raw.zScore(`${keyPrefix}u:${owner}:sessions`, lost.id)).toBeNull();
    const activity = `${keyPrefix}{index}:activity`;
    expect(await raw.zScore(activity, lost.id)).not.toBeNull();
    const removed = await s.expire(hourAgo);
    expect(removed).toEqual(expect.arrayContaining([kept.id, lost.id]));
    expect(removed).not.toContain(fresh.id);
    for (const id of [kept.id, lost.id]) expect(await raw.zScore(activity, id)).toBeNull();
    expect(await raw.zScore(`${keyPrefix}{index}:ids`, kept.id)).toBeNull();
    expect((await s.listSessions(owner)).sessions.map((x) => x.id)).toEqual([fresh.id]);
  });

  it("stores content with Lua and Redis special characters verbatim", async () => {
    const s = store({ ttlMs: 0 });
    const session = await s.createSession({ id: newSessionId(), userId: "inject" });
    const nasty = [
      "'; redis.call('FLUSHALL') --",
      "]]..redis.call('DEL', KEYS[1])..[[",
      "*3\r\n$3\r\nDEL\r\n$1\r\nx\r\n",
      '{"seq":999,"role":"system"}',
      "%s %d %% \\0 \u0000 {tag} }:msgs",
    ];
    await s.appendMessages(
      session.id,
      nasty.map((content) => ({ role: "user" as const, content, name: "x'\"]]" })),
    );
    const read = await s.getMessages(session.id);
    expect(read.map((m) => m.content)).toEqual(nasty);
    expect(read.map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(read.every((m) => m.name === "x'\"]]" && m.role === "user")).toBe(true);
    // A message that tries to carry its own seq gets the store's.
    const [forged] = await s.appendMessages(session.id, [{ role: "user", content: "f", seq: 1 } as never]);
    expect(forged.seq).toBe(6);
    expect((await s.getMessages(session.id, { last: 1 }))[0].seq).toBe(6);
    const weirdOwner = "user*?[]{x}:sessions";
    const weird = await s.createSession({
      id: newSessionId(),
      userId: weirdOwner,
      metadata: { "a'b": "]]" },
    });
    expect((await s.listSessions(weirdOwner)).sessions).toEqual([weird]);
  });

  it("keeps each owner-scoped read's transaction whole among concurrent calls, and an error reply inside it is store_corrupt", async () => {
    const s = store({ ttlMs: 0 });
    const sessions = await Promise.all(
      Array.from({ length: 8 }, (_, k) => s.createSession({ id: newSessionId(), userId: `reader-${k}` })),
    );
    await Promise.all(sessions.map((x, k) => s.appendMessages(x.id, [{ role: "user", content: `only ${k}` }])));
    // Reads, appends and another owner's refused reads issued together on the one connection: each
    // read gets its own session's window (MULTI … EXEC sent as plain commands must never interleave).
    const calls = sessions.flatMap((x, k) => [
      s.getMessages(x.id, { last: 20, owner: { userId: `reader-${k}` } }).then((read) => read.map((m) => m.content)),
      s
        .appendMessages(x.id, [{ role: "assistant", content: `reply ${k}` }], { owner: { userId: `reader-${k}` } })
        .then(() => "appended"),
      s.getMessages(x.id, { last: 20, owner: { userId: "intruder" } }).then(
        () => "read by another owner",
        (error: unknown) => (isThreadkeepError(error, "session_not_found") ? "refused" : String(error)),
      ),
    ]);
    const replies = await Promise.all(calls);
    sessions.forEach((_, k) => {
      expect(replies[3 * k]).toEqual([`only ${k}`]);
      expect(replies.slice(3 * k + 1, 3 * k + 3)).toEqual(["appended", "refused"]);
    });
    // A window that is not a list: the error reply comes back inside EXEC's answer.
    await raw.del(`${keyPrefix}s:{${sessions[0].id}}:msgs`);
    await raw.set(`${keyPrefix}s:{${sessions[0].id}}:msgs`, "not a list");
    await expectCode(s.getMessages(sessions[0].id, { last: 20, owner: { userId: "reader-0" } }), "store_corrupt");
    // The connection goes on serving.
    expect(
      (await s.getMessages(sessions[1].id, { last: 20, owner: { userId: "reader-1" } })).map((m) => m.content),
    ).toEqual(["only 1", "reply 1"]);
  });

  it("serialises 2 processes × 100 concurrent turns: contiguous seq, each turn adjacent, none lost or duplicated", async () => {
    const s = store({ ttlMs: 0 });
    const session = await s.createSession({ id: newSessionId(), userId: "hammer" });
    const recipe = {
      module: "src/stores/redis/index.ts",
      factory: "createRedisStore",
      options: { url: TEST_REDIS_URL, keyPrefix, ttlMs: 0 },
    };
    await expectTwoProcessTurnOrder(s, recipe, session.id);
  }, 60_000);

  it("hands the lease on when a holder crashes, and a dead waiter does not block the line", async () => {
    const s = store({ ttlMs: 0 });
    const id = newSessionId();
    await s.createSession({ id, userId: "crash" });
    // A crashed holder: its lease is never released.
    await s.acquireLease(id, { ttlMs: 200 });
    // A crashed waiter: in line, never polls again.
    const queue = `${keyPrefix}s:{${id}}:queue`;
    await raw.zAdd(queue, { score: 0, value: "ghost" });
    await raw.zAdd(`${keyPrefix}s:{${id}}:alive`, { score: Date.now() + 300, value: "ghost" });
    const started = Date.now();
    const next = await s.acquireLease(id, { waitMs: 5_000 });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(await raw.zScore(queue, "ghost")).toBeNull();
    await next.release();
  });

  it("fails with store_unavailable within a bounded time when nothing listens", async () => {
    // Bounded by the connect timeout, not by the command timeout: the bound sits half way between the
    // two, so a loaded machine's slowness (3 s measured once at a load average of 27 on 2 cores, against
    // well under 1 s idle) does not pass for waiting out the command timeout, nor the reverse.
    const connectTimeoutMs = 500;
    const commandTimeoutMs = 20_000;
    const s = store({ url: "redis://127.0.0.1:1", connectTimeoutMs, commandTimeoutMs });
    for (const call of [
      () => s.getSession(newSessionId()),
      () => s.appendMessages(newSessionId(), [{ role: "user", content: "x" }]),
    ]) {
      const started = Date.now();
      await expectCode(call(), "store_unavailable");
      expect(Date.now() - started).toBeLessThan((connectTimeoutMs + commandTimeoutMs) / 2);
    }
    await s.close();
  });

  it("surfaces a stall or a connection loss as store_unavailable and recovers by itself", async () => {
    const target = new URL(TEST_REDIS_URL);
    const sockets = new Set<Socket>();
    const proxy = (): Server =>
      createServer((client) => {
        const upstream = connect(Number(target.port || 6379), target.hostname);
        for (const sock of [client, upstream]) {
          sockets.add(sock);
          sock.on("close", () => sockets.delete(sock));
          sock.on("error", () => {});
        }
        client.pipe(upstream).pipe(client);
      });
    let server = proxy();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    const errors: Error[] = [];
    const s = store({
      url: `redis://127.0.0.1:${port}`,
      ttlMs: 0,
      connectTimeoutMs: 500,
      commandTimeoutMs: 500,
      onError: (e) => errors.push(e),
    });
    const session = await s.createSession({ id: newSessionId(), userId: "flaky" });
    await s.appendMessages(session.id, [{ role: "user", content: "before" }]);

    // A stalled server (paused, or a path that stops delivering): the reply deadline answers for it.
    // Two commands in flight with deadlines 300 ms apart: each expires by its own.
    for (const sock of sockets) sock.pause();
    const stalled = Date.now();
    const first = s.getMessages(session.id);
    await sleep(300);
    const secondAt = Date.now();
    const second = s.countMessages(session.id);
    await expectCode(first, "store_unavailable");
    expect(Date.now() - stalled).toBeLessThan(1_500);
    await expectCode(second, "store_unavailable");
    expect(Date.now() - secondAt).toBeLessThan(1_500);
    for (const sock of sockets) sock.resume();
    // The store counts a silence from its start until a reply ends it, and the stalled commands'
    // replies come first: a read made before they arrive gets only what is left of the connect
    // timeout (11 ms once, on a loaded machine, when this read was asserted at once), or fails at
    // once as store_unavailable. Once they have come, reads answer.
    const resumed = Date.now();
    let after: unknown;
    while (Date.now() - resumed < 2_000) {
      after = await s.getMessages(session.id).catch((error) => error);
      if (Array.isArray(after)) break;
      expect(isThreadkeepError(after, "store_unavailable"), String(after)).toBe(true);
      await sleep(20);
    }
    expect(Array.isArray(after), String(after)).toBe(true);
    expect((after as { content: unknown }[]).map((m) => m.content)).toEqual(["before"]);

    // A server that goes away: refused at once while reconnecting, never queued.
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const sock of sockets) sock.destroy();
    });
    for (let i = 0; i < 3; i++) {
      const started = Date.now();
      let caught: unknown;
      await s.getMessages(session.id).catch((error) => (caught = error));
      expect(isThreadkeepError(caught, "store_unavailable"), String(caught)).toBe(true);
      expect(Date.now() - started).toBeLessThan(3_000);
    }
    expect(errors.length).toBeGreaterThan(0);

    server = proxy();
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
    const deadline = Date.now() + 5_000;
    let read: unknown;
    while (Date.now() < deadline) {
      read = await s.getMessages(session.id).catch((error) => error);
      if (Array.isArray(read)) break;
      await sleep(50);
    }
    expect(Array.isArray(read), String(read)).toBe(true);
    await s.appendMessages(session.id, [{ role: "assistant", content: "after" }]);
    expect((await s.getMessages(session.id)).map((m) => m.content)).toEqual(["before", "after"]);
    await s.close();
    for (const sock of sockets) sock.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("refuses work after close, waiters included, and names the missing full-text search", async () => {
    const holder = store({ ttlMs: 0 });
    const s = open({ ttlMs: 0 });
    await expectCode(s.search({ userId: "u", text: "x", mode: "fulltext" }), "not_supported");
    const id = newSessionId();
    const held = await holder.acquireLease(id);
    // The check is attached before close, so the waiter's rejection is never momentarily unhandled.
    const waiting = expectCode(s.acquireLease(id, { waitMs: 10_000 }), "store_unavailable");
    await sleep(50);
    await s.close();
    await waiting;
    await expectCode(s.getSession(newSessionId()), "store_unavailable");
    await held.release();
  });
});
