/**
 * The turn lease in the store conformance suite: turns granted one at a time in arrival order,
 * waits that give up, lapsed leases fenced out, renewal, and a lease shared by two store instances
 * where `capabilities.crossProcessLease` says so.
 */
import { describe, expect, it } from "vitest";
import type { FullStore } from "../core/types.js";
import { expectCode, type OpenStore, sessionMaker, sleep, text } from "./_conformance-fixtures.js";

/** Registers the lease tests; `store()` gives the suite's open store, `target` names it and opens another. */
export function describeTurnLease(store: () => FullStore, target: { name: string; create: OpenStore }): void {
  const newSession = sessionMaker(store);

  describe("turn lease", () => {
    it("grants turns one at a time in arrival order", async () => {
      const session = await newSession();
      const order: number[] = [];
      const first = await store().acquireLease(session.id);
      const waiters = [1, 2, 3].map(async (n) => {
        const lease = await store().acquireLease(session.id, { waitMs: 10_000 });
        order.push(n);
        await sleep(5);
        await lease.release();
      });
      await sleep(50);
      expect(order).toEqual([]);
      await first.release();
      await Promise.all(waiters);
      expect(order).toEqual([1, 2, 3]);
    });

    it("gives up with session_busy after waitMs", async () => {
      const session = await newSession();
      const held = await store().acquireLease(session.id, { ttlMs: 10_000 });
      await expectCode(store().acquireLease(session.id, { waitMs: 100 }), "session_busy");
      await held.release();
      const next = await store().acquireLease(session.id, { waitMs: 1000 });
      await next.release();
    });

    it("lets a lapsed lease go and fences its holder out", async () => {
      const session = await newSession();
      const stale = await store().acquireLease(session.id, { ttlMs: 150 });
      const fresh = await store().acquireLease(session.id, { waitMs: 5_000, ttlMs: 10_000 });
      expect(fresh.fence).toBeGreaterThan(stale.fence);
      await expectCode(store().appendMessages(session.id, [text("late")], { fence: stale.fence }), "lease_expired");
      await store().appendMessages(session.id, [text("current")], { fence: fresh.fence });
      await stale.release();
      expect((await store().getMessages(session.id)).map((m) => m.content)).toEqual(["current"]);
      await fresh.release();
    });

    it("renews a lease past its first lifetime, so a long turn keeps its session", async () => {
      const session = await newSession();
      const lease = await store().acquireLease(session.id, { ttlMs: 500 });
      await sleep(300);
      expect(await lease.renew(1_500)).toBe(true);
      expect(lease.expiresAt).toBeGreaterThan(Date.now() + 1_000);
      await sleep(400);
      await expectCode(store().acquireLease(session.id, { waitMs: 50 }), "session_busy");
      await store().appendMessages(session.id, [text("still mine")], { fence: lease.fence });
      await lease.release();
      const next = await store().acquireLease(session.id, { waitMs: 1000 });
      expect(next.fence).toBeGreaterThan(lease.fence);
      await next.release();
    });

    it("takes a lapsed lease back on renew only while nobody else was granted it", async () => {
      const session = await newSession();
      const lapsed = await store().acquireLease(session.id, { ttlMs: 100 });
      await sleep(250);
      expect(await lapsed.renew(10_000)).toBe(true);
      await expectCode(store().acquireLease(session.id, { waitMs: 50 }), "session_busy");
      await lapsed.release();
      const stale = await store().acquireLease(session.id, { ttlMs: 100 });
      const fresh = await store().acquireLease(session.id, { waitMs: 5_000, ttlMs: 10_000 });
      expect(await stale.renew(10_000)).toBe(false);
      await expectCode(store().appendMessages(session.id, [text("late")], { fence: stale.fence }), "lease_expired");
      await fresh.release();
      expect(await fresh.renew(10_000)).toBe(false);
      const after = await store().acquireLease(session.id, { waitMs: 1000 });
      await after.release();
    });

    it("serialises whole turns so each turn's messages stay adjacent", async () => {
      const session = await newSession();
      await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const lease = await store().acquireLease(session.id, { waitMs: 20_000 });
          try {
            const history = await store().getMessages(session.id, { last: 1 });
            await sleep(1);
            await store().appendMessages(session.id, [text(`q${i}`)], { fence: lease.fence });
            await store().appendMessages(
              session.id,
              [{ role: "assistant", content: `a${i} after ${history.length}` }],
              { fence: lease.fence },
            );
          } finally {
            await lease.release();
          }
        }),
      );
      const all = await store().getMessages(session.id);
      expect(all.map((m) => m.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
      for (let i = 0; i < 40; i += 2)
        expect(String(all[i + 1].content)).toMatch(new RegExp(`^a${String(all[i].content).slice(1)} `));
    });

    it("holds across two store instances where the backend shares state", async (ctx) => {
      if (!store().capabilities.crossProcessLease) ctx.skip(`${target.name} leases are per process`);
      const second = await target.create();
      try {
        const session = await newSession();
        const order: string[] = [];
        const lease = await store().acquireLease(session.id);
        const other = second.acquireLease(session.id, { waitMs: 10_000 }).then(async (l) => {
          order.push("second");
          await l.release();
        });
        await sleep(100);
        order.push("first");
        await lease.release();
        await other;
        expect(order).toEqual(["first", "second"]);
      } finally {
        await second.close();
      }
    });
  });
}
