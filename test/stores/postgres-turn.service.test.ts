/**
 * The PostgreSQL store's combined turn (`openTurn` reads in the statement that grants the lease, and a
 * commit with `releaseLease` gives it back in its own statement), against the races that a read in the
 * grant's statement must survive: a previous holder whose commit-and-release, or whose late append,
 * lands while the grant waits on the lease row (after the grant's statement took its snapshot).
 */
import { createHash, randomUUID } from "node:crypto";
import type postgres from "postgres";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { FullStore } from "../../src/core/types.js";
import { serviceAvailable } from "../_services.js";
import { postgresStoresInSchema } from "./_postgres-stores.js";

const enabled = await serviceAvailable("postgres");
const say = (content: string) => ({ role: "user" as const, content });
const opening = (userId: string, last = 20) => ({ owner: { userId }, last, lease: { ttlMs: 10_000, waitMs: 10_000 } });

describe.runIf(enabled === true)("postgres combined turn", () => {
  const { schema, admin, store, other } = postgresStoresInSchema({ adminConnections: 3 });

  /** Resolves once a statement waits for the transaction of `blocker` (the grant, on the lease row). */
  const grantWaitsFor = async (blocker: postgres.ReservedSql) => {
    const [{ pid }] = await blocker<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
    const deadline = Date.now() + 4_000;
    for (;;) {
      const [{ n }] = await admin<{ n: number }[]>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE ${pid}::int = ANY(pg_blocking_pids(pid))`;
      if (n > 0) return;
      if (Date.now() > deadline) throw new Error("the grant never waited on the lease row");
      await new Promise((r) => setTimeout(r, 10));
    }
  };

  const setup = async () => {
    const owner = `owner-${randomUUID()}`;
    const session = await store.createSession({ id: newSessionId(), userId: owner });
    await store.appendMessages(session.id, [say("m1")]);
    return { owner, id: session.id };
  };

  it("reads a commit that released the lease while the grant waited on the row", async () => {
    const { owner, id } = await setup();
    const held = await store.acquireLease(id, { ttlMs: 10_000 });
    // The holder's last write and its release, in one transaction that is still open when the next
    // turn's grant starts: the grant's statement snapshot cannot hold that write.
    const reserved = await admin.reserve();
    try {
      await reserved`BEGIN`;
      await reserved`SELECT * FROM threadkeep_append_queued(${id}, ${['{"role":"user","content":"last words"}']}::text[],
        ${["last words"]}::text[], NULL, ${held.fence}::bigint, 'english'::regconfig)`;
      await reserved`UPDATE leases SET expires_at = 0 WHERE session_id = ${id} AND fence = ${held.fence}`;
      const opened = other.openTurn!(id, opening(owner));
      await grantWaitsFor(reserved);
      await reserved`COMMIT`;
      const turn = await opened;
      await turn.lease.release();
      expect(turn.lease.fence).toBeGreaterThan(held.fence);
      expect(turn.messages.map((m) => m.content)).toEqual(["m1", "last words"]);
    } finally {
      reserved.release();
    }
  });

  it("reads the append of a lapsed holder that held the row while the grant waited", async () => {
    const { owner, id } = await setup();
    const stale = await store.acquireLease(id, { ttlMs: 50 });
    await new Promise((r) => setTimeout(r, 100));
    const reserved = await admin.reserve();
    try {
      // The lapsed holder's append has taken the lease row FOR SHARE (its fence check) and not committed.
      await reserved`BEGIN`;
      await reserved`SELECT * FROM threadkeep_append_queued(${id}, ${['{"role":"user","content":"late"}']}::text[],
        ${["late"]}::text[], NULL, ${stale.fence}::bigint, 'english'::regconfig)`;
      const opened = other.openTurn!(id, opening(owner));
      await grantWaitsFor(reserved);
      await reserved`COMMIT`;
      const turn = await opened;
      await turn.lease.release();
      expect(turn.messages.map((m) => m.content)).toEqual(["m1", "late"]);
      await expect(store.appendMessages(id, [say("too late")], { fence: stale.fence })).rejects.toMatchObject({
        code: "lease_expired",
      });
    } finally {
      reserved.release();
    }
  });

  it("a releasing commit notifies other processes' waiters, and only when some wait", async () => {
    // The stores' NOTIFY channel (one per schema), heard as another process would hear it.
    const channel = `threadkeep_${createHash("sha256").update(schema).digest("hex").slice(0, 16)}`;
    const heard: string[] = [];
    const listening = await admin.listen(channel, (payload) => heard.push(payload));
    const waitingTickets = async (id: string, n: number) => {
      const deadline = Date.now() + 5_000;
      while (
        (await admin<{ n: number }[]>`SELECT count(*)::int AS n FROM lease_queue WHERE session_id = ${id}`)[0].n < n
      ) {
        if (Date.now() > deadline) throw new Error("the waiter never joined the line");
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    const commit = (s: FullStore, id: string, fence: number, owner: string) =>
      s.appendMessages(id, [say("q")], { fence, owner: { userId: owner }, releaseLease: true });
    const settle = () => new Promise((r) => setTimeout(r, 300));
    try {
      const { owner, id } = await setup();
      // Nobody waits: the commit is the turn's last statement.
      const alone = await store.openTurn!(id, opening(owner));
      await commit(store, id, alone.lease.fence, owner);
      // A waiter of the same store is woken in process, without a notification.
      const first = await store.openTurn!(id, opening(owner));
      const local = store.openTurn!(id, opening(owner));
      await waitingTickets(id, 1);
      await commit(store, id, first.lease.fence, owner);
      const second = await local;
      await settle();
      expect(heard.filter((p) => p === id)).toEqual([]);
      // A waiter of another store (process) is notified.
      const remote = other.openTurn!(id, opening(owner));
      await waitingTickets(id, 1);
      await commit(store, id, second.lease.fence, owner);
      const third = await remote;
      await settle();
      // Heard before the new holder's own release (which notifies too).
      expect(heard.filter((p) => p === id).length).toBeGreaterThan(0);
      await third.lease.release();
      expect(third.messages.map((m) => m.content)).toEqual(["m1", "q", "q", "q"]);
    } finally {
      await listening.unlisten();
    }
  });

  it("runs 2 stores × 50 concurrent turns in order, each reading the turn before it", async () => {
    const { owner, id } = await setup();
    const turn = async (s: FullStore, tag: string) => {
      await new Promise((r) => setTimeout(r, Math.random() * 100));
      const opened = await s.openTurn!(id, opening(owner, 5));
      const seen = opened.messages.at(-1)!;
      await s.appendMessages(id, [say(`${tag}-q`), { role: "assistant", content: `${tag} saw ${seen.seq}` }], {
        fence: opened.lease.fence,
        owner: { userId: owner },
        releaseLease: true,
      });
      // Released by the commit: nothing left to give back.
      await opened.lease.release();
    };
    await Promise.all(Array.from({ length: 50 }, (_, i) => [turn(store, `a${i}`), turn(other, `b${i}`)]).flat());
    const all = await store.getMessages(id);
    expect(all.map((m) => m.seq)).toEqual(Array.from({ length: 201 }, (_, i) => i + 1));
    for (let i = 1; i < all.length; i += 2) {
      // Each turn's question lands right after what its read ended with.
      expect(all[i].content).toMatch(/-q$/);
      expect(all[i + 1].content).toBe(`${String(all[i].content).slice(0, -2)} saw ${all[i].seq - 1}`);
    }
  });
});
