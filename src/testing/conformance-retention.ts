/**
 * Retention in the store conformance suite: the per-session message cap applied with the append,
 * and expiry of inactive sessions.
 */
import { describe, expect, it } from "vitest";
import type { FullStore } from "../core/types.js";
import { requireNative, sessionMaker, text, user } from "./_conformance-fixtures.js";

/** Registers the retention tests; `store()` gives the suite's open store. */
export function describeRetention(store: () => FullStore): void {
  const newSession = sessionMaker(store);

  describe("retention", () => {
    it("caps messages per session in the same step as the append", async () => {
      const session = await newSession();
      await store().appendMessages(session.id, [text("1"), text("2"), text("3")], { maxMessages: 5 });
      await store().appendMessages(session.id, [text("4"), text("5"), text("6"), text("7"), text("8")], {
        maxMessages: 5,
      });
      const all = await store().getMessages(session.id);
      expect(all.map((m) => m.seq)).toEqual([4, 5, 6, 7, 8]);
      expect(await store().countMessages(session.id)).toBe(5);
      const [next] = await store().appendMessages(session.id, [text("9")], { maxMessages: 5 });
      expect(next.seq).toBe(9);
      expect((await store().getMessages(session.id, { last: 20 }))[0].seq).toBe(5);
    });

    it("applies the cap on an empty append (compaction trims without adding)", async () => {
      const session = await newSession();
      await store().appendMessages(
        session.id,
        Array.from({ length: 8 }, (_, i) => text(`m${i + 1}`)),
      );
      expect(await store().appendMessages(session.id, [], { maxMessages: 3 })).toEqual([]);
      expect((await store().getMessages(session.id)).map((m) => m.seq)).toEqual([6, 7, 8]);
      expect((await store().appendMessages(session.id, [text("next")]))[0].seq).toBe(9);
    });

    it("touches the session on an empty append, as on every append", async () => {
      const session = await newSession(user(), { lastActivityAt: Date.now() - 3_600_000 });
      const before = Date.now();
      expect(await store().appendMessages(session.id, [], { maxMessages: 3 })).toEqual([]);
      // A second of slack: a store may take the time from its server's clock.
      expect((await store().getSession(session.id))!.lastActivityAt).toBeGreaterThanOrEqual(before - 1_000);
    });

    it("expires inactive sessions and returns their ids", async (ctx) => {
      requireNative(ctx, store(), "retention");
      const owner = user();
      const now = Date.now();
      const stale = await newSession(owner, { lastActivityAt: now - 10 * 86_400_000 });
      await store().appendMessages(stale.id, [text("old")]);
      await store().touchSession(stale.id, now - 10 * 86_400_000);
      const fresh = await newSession(owner);
      const removed = await store().expire(now - 7 * 86_400_000);
      expect(removed).toContain(stale.id);
      expect(removed).not.toContain(fresh.id);
      expect(await store().getSession(stale.id)).toBeNull();
      expect(await store().getMessages(stale.id)).toEqual([]);
      expect(await store().getSession(fresh.id)).not.toBeNull();
      expect((await store().listSessions(owner)).sessions.map((s) => s.id)).toEqual([fresh.id]);
    });
  });
}
