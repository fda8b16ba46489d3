/**
 * Sessions and their listing in the store conformance suite: create, read (one, or several at once:
 * `getSessions`, natively or as `completeStore` derives it), update, touch and delete a session; list
 * one owner's sessions by activity and every owner's by id, with cursor paging.
 */
import { describe, expect, it } from "vitest";
import { newSessionId } from "../core/ids.js";
import type { FullStore } from "../core/types.js";
import { expectCode, implementsNatively, requireNative, sessionMaker, text, user } from "./_conformance-fixtures.js";

/** Registers the sessions tests; `store()` gives the suite's open store. */
export function describeSessions(store: () => FullStore): void {
  const newSession = sessionMaker(store);

  describe("sessions", () => {
    it("creates, reads and refuses a duplicate id", async () => {
      const userId = user();
      const before = Date.now();
      const created = await store().createSession({ id: newSessionId(), userId, metadata: { title: "Groceries" } });
      expect(created.userId).toBe(userId);
      expect(created.createdAt).toBeGreaterThanOrEqual(before - 1000);
      expect(created.lastActivityAt).toBe(created.createdAt);
      expect(await store().getSession(created.id)).toEqual(created);
      await expectCode(store().createSession({ id: created.id, userId: user() }), "session_exists");
      expect((await store().getSession(created.id))?.userId).toBe(userId);
    });

    it("returns null for a missing session and not_found for writes to it", async () => {
      const id = newSessionId();
      expect(await store().getSession(id)).toBeNull();
      expect(await store().getMessages(id)).toEqual([]);
      await expectCode(store().appendMessages(id, [text("hi")]), "session_not_found");
      await expectCode(store().touchSession(id), "session_not_found");
      if (implementsNatively(store(), "state")) await expectCode(store().setState(id, {}, 0), "session_not_found");
      expect(await store().deleteSession(id)).toBe(false);
    });

    it("returns copies, never its own objects", async () => {
      const session = await store().createSession({ id: newSessionId(), userId: user(), metadata: { a: 1 } });
      session.metadata.a = 2;
      expect((await store().getSession(session.id))?.metadata).toEqual({ a: 1 });
      const [message] = await store().appendMessages(session.id, [text("original")]);
      message.content = "changed";
      const [read] = await store().getMessages(session.id);
      read.content = "changed again";
      expect((await store().getMessages(session.id))[0].content).toBe("original");
    });

    it("reads several sessions at once: each as getSession reads it, in the order asked, null for a missing or deleted one", async () => {
      const [a, b] = [
        await store().createSession({ id: newSessionId(), userId: user(), metadata: { title: "A" } }),
        await store().createSession({ id: newSessionId(), userId: user(), metadata: { title: "B" } }),
      ];
      const gone = await store().createSession({ id: newSessionId(), userId: a.userId });
      await store().deleteSession(gone.id);
      const missing = newSessionId();
      const read = await store().getSessions([b.id, missing, a.id, gone.id, b.id]);
      expect(read).toEqual([
        await store().getSession(b.id),
        null,
        await store().getSession(a.id),
        null,
        await store().getSession(b.id),
      ]);
      expect(read[0]).toEqual(b);
      expect(await store().getSessions([])).toEqual([]);
      // Copies: neither each other nor the store's own.
      read[0]!.metadata.title = "changed";
      expect(read[4]!.metadata).toEqual({ title: "B" });
      expect((await store().getSessions([b.id]))[0]!.metadata).toEqual({ title: "B" });
    });

    it("updates metadata and touches", async () => {
      const session = await newSession(user(), { lastActivityAt: 1_000 });
      const updated = await store().updateSessionMetadata(session.id, { title: "Renamed", tags: ["x"] });
      expect(updated.metadata).toEqual({ title: "Renamed", tags: ["x"] });
      await store().touchSession(session.id, 5_000);
      expect((await store().getSession(session.id))?.lastActivityAt).toBe(5_000);
      const now = Date.now();
      await store().touchSession(session.id);
      expect((await store().getSession(session.id))!.lastActivityAt).toBeGreaterThanOrEqual(now - 1000);
    });

    it("deletes a session with its messages, summaries and state", async (ctx) => {
      requireNative(ctx, store(), "summaries", "state");
      const session = await newSession();
      await store().appendMessages(session.id, [text("a"), text("b")]);
      await store().saveSummary(session.id, { fromSeq: 1, toSeq: 1, content: "s" });
      await store().setState(session.id, { k: 1 }, 0);
      expect(await store().deleteSession(session.id)).toBe(true);
      expect(await store().getSession(session.id)).toBeNull();
      expect(await store().getMessages(session.id)).toEqual([]);
      expect(await store().listSummaries(session.id)).toEqual([]);
      // Recreating the id starts from nothing.
      await store().createSession({ id: session.id, userId: session.userId });
      expect(await store().countMessages(session.id)).toBe(0);
      expect(await store().getState(session.id)).toEqual({ version: 0, data: {} });
      const [first] = await store().appendMessages(session.id, [text("again")]);
      expect(first.seq).toBe(1);
    });
  });

  describe("listing", () => {
    it("lists one owner's sessions, most recent activity first, with cursor paging", async () => {
      const owner = user();
      const other = user();
      const base = Date.now() - 60_000;
      const ids: string[] = [];
      for (let i = 0; i < 7; i++) ids.push((await newSession(owner, { lastActivityAt: base + i * 1000 })).id);
      await newSession(other, { lastActivityAt: base + 10_000 });
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await store().listSessions(owner, { limit: 3, cursor });
        expect(page.sessions.length).toBeLessThanOrEqual(3);
        for (const s of page.sessions) expect(s.userId).toBe(owner);
        seen.push(...page.sessions.map((s) => s.id));
        cursor = page.nextCursor;
        pages++;
      } while (cursor && pages < 10);
      expect(pages).toBe(3);
      expect(seen).toEqual([...ids].reverse());
    });

    it("moves a session to the front when it is active", async () => {
      const owner = user();
      const old = await newSession(owner, { lastActivityAt: Date.now() - 50_000 });
      await newSession(owner, { lastActivityAt: Date.now() - 40_000 });
      await store().appendMessages(old.id, [text("back again")]);
      const page = await store().listSessions(owner);
      expect(page.sessions[0].id).toBe(old.id);
      expect(page.nextCursor).toBeNull();
    });

    it("lists every owner's sessions by id for export and migration", async (ctx) => {
      requireNative(ctx, store(), "retention");
      const mine = await Promise.all([user(), user(), user(), user(), user()].map((u) => newSession(u)));
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await store().listAllSessions({ limit: 7, cursor });
        expect(page.sessions.length).toBeLessThanOrEqual(7);
        seen.push(...page.sessions.map((s) => s.id));
        cursor = page.nextCursor;
        pages++;
      } while (cursor && pages < 10_000);
      expect([...seen].sort()).toEqual(seen);
      expect(new Set(seen).size).toBe(seen.length);
      for (const s of mine) expect(seen).toContain(s.id);
    });

    it("lists nothing for an owner without sessions", async () => {
      expect(await store().listSessions(user())).toEqual({ sessions: [], nextCursor: null });
    });
  });
}
