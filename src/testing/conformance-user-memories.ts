/**
 * Memories about users in the store conformance suite: add, get, list in pages, update with history,
 * delete, and one user's memories never reachable with another user's id; and erasing a user through
 * `Memory.eraseUser` leaves nothing of them (sessions, messages, search hits, vectors, memories) and
 * nothing of anyone else missing. Every owner of memories is listed (a user with memories and no
 * session too) until erased; an imported memory keeps its `updatedAt` and history exactly. A store
 * that keeps embeddings also keeps one per memory, for its
 * current text, gone with the memory or its user.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Memory } from "../core/memory/memory.js";
import {
  canStoreMemoryVectors,
  canStoreVectors,
  type FullStore,
  type UserIdPage,
  type UserMemoryVectorStore,
} from "../core/types.js";
import { expectCode, implementsNatively, requireNative, sessionMaker, text, user } from "./_conformance-fixtures.js";

/** Registers the memory tests; `store()` gives the suite's open store. */
export function describeUserMemories(store: () => FullStore): void {
  const newSession = sessionMaker(store);

  describe("memories about users", () => {
    it("adds, gets and lists a memory; another user's id reads as missing", async (ctx) => {
      requireNative(ctx, store(), "userMemories");
      const alice = user();
      const added = await store().addUserMemory({ userId: alice, text: "is vegetarian", metadata: { topic: "food" } });
      expect(added).toMatchObject({
        userId: alice,
        text: "is vegetarian",
        source: { kind: "hand" },
        metadata: { topic: "food" },
        history: [],
      });
      expect(added.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(added.updatedAt).toBe(added.createdAt);
      expect(await store().getUserMemory(alice, added.id)).toEqual(added);
      const fromTurn = await store().addUserMemory({
        userId: alice,
        text: "manager is Sam",
        source: { kind: "session", sessionId: "s-1", seqs: [3, 4] },
      });
      expect((await store().getUserMemory(alice, fromTurn.id))?.source).toEqual({
        kind: "session",
        sessionId: "s-1",
        seqs: [3, 4],
      });

      const bob = user();
      expect(await store().getUserMemory(bob, added.id)).toBeNull();
      expect((await store().listUserMemories(bob)).memories).toEqual([]);
      await expectCode(store().updateUserMemory(bob, added.id, { text: "eats meat" }), "not_found");
      expect(await store().deleteUserMemory(bob, added.id)).toBe(false);
      expect(await store().deleteUserMemories(bob)).toBe(0);
      expect((await store().getUserMemory(alice, added.id))?.text).toBe("is vegetarian");
    });

    it("lists one user's memories newest first, in pages", async (ctx) => {
      requireNative(ctx, store(), "userMemories");
      const alice = user();
      const base = Date.now() - 10_000;
      // Two share a time: the id breaks the tie, and the cursor must not skip or repeat either.
      const times = [base, base + 1, base + 1, base + 2, base + 3];
      const made = [];
      for (const [i, createdAt] of times.entries())
        made.push(await store().addUserMemory({ userId: alice, text: `fact ${i}`, createdAt }));
      await store().addUserMemory({ userId: user(), text: "someone else" });
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await store().listUserMemories(alice, { limit: 2, cursor });
        expect(page.memories.length).toBeLessThanOrEqual(2);
        seen.push(...page.memories.map((m) => m.id));
        cursor = page.nextCursor;
        pages++;
      } while (cursor && pages < 10);
      const expected = [...made].sort((a, b) => b.updatedAt - a.updatedAt || (a.id < b.id ? 1 : -1)).map((m) => m.id);
      expect(seen).toEqual(expected);
      expect(pages).toBe(3);
      await expectCode(store().listUserMemories(alice, { cursor: "not-a-cursor" }), "invalid_request");
    });

    it("updates a memory, keeping the old text in its history", async (ctx) => {
      requireNative(ctx, store(), "userMemories");
      const alice = user();
      const added = await store().addUserMemory({
        userId: alice,
        text: "lives in Amsterdam",
        metadata: { a: 1 },
        createdAt: Date.now() - 1_000,
      });
      const moved = await store().updateUserMemory(alice, added.id, {
        text: "lives in Utrecht",
        reason: "contradiction",
        metadata: { b: 2 },
      });
      expect(moved).toMatchObject({
        id: added.id,
        text: "lives in Utrecht",
        createdAt: added.createdAt,
        metadata: { a: 1, b: 2 },
      });
      expect(moved.updatedAt).toBeGreaterThan(added.updatedAt);
      expect(moved.history).toEqual([
        { text: "lives in Amsterdam", replacedAt: moved.updatedAt, reason: "contradiction" },
      ]);
      const again = await store().updateUserMemory(alice, added.id, { text: "lives in Utrecht", metadata: { c: 3 } });
      expect(again.history).toHaveLength(1);
      expect(await store().getUserMemory(alice, added.id)).toEqual(again);
      expect((await store().listUserMemories(alice)).memories[0]).toEqual(again);
      await expectCode(store().updateUserMemory(alice, randomUUID(), { text: "x" }), "not_found");
    });

    it("deletes one memory, and all of a user's", async (ctx) => {
      requireNative(ctx, store(), "userMemories");
      const alice = user();
      const bob = user();
      const one = await store().addUserMemory({ userId: alice, text: "one" });
      await store().addUserMemory({ userId: alice, text: "two" });
      await store().addUserMemory({ userId: alice, text: "three" });
      const kept = await store().addUserMemory({ userId: bob, text: "bob's" });
      expect(await store().deleteUserMemory(alice, one.id)).toBe(true);
      expect(await store().deleteUserMemory(alice, one.id)).toBe(false);
      expect(await store().getUserMemory(alice, one.id)).toBeNull();
      expect(await store().deleteUserMemories(alice)).toBe(2);
      expect((await store().listUserMemories(alice)).memories).toEqual([]);
      expect(await store().getUserMemory(bob, kept.id)).toEqual(kept);
    });

    it("lists every owner of memories in id order, sessions or not, until they are erased", async (ctx) => {
      requireNative(ctx, store(), "userMemories", "memoryOwners");
      const s = store();
      const [first, second, third] = [user(), user(), user()].sort();
      // `second` has memories and no session; `third` a session and no memories (not an owner).
      await newSession(first);
      await s.addUserMemory({ userId: first, text: "one" });
      await s.addUserMemory({ userId: first, text: "two" });
      await s.addUserMemory({ userId: second, text: "only memories" });
      await newSession(third);
      /** Every owner the store lists, page by page (the suite's store holds other tests' owners too). */
      const allOwners = async () => {
        const seen: string[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          // Small pages first (the cursor must neither skip nor repeat), then larger ones: the store may hold many.
          const limit = pages < 3 ? 1 : 200;
          const page: UserIdPage = await s.listMemoryOwners({ limit, cursor });
          expect(page.userIds.length).toBeLessThanOrEqual(limit);
          seen.push(...page.userIds);
          cursor = page.nextCursor;
        } while (cursor && ++pages < 1_000);
        return seen;
      };
      const listed = await allOwners();
      // Ascending by id, each once, across pages.
      expect(listed).toEqual([...new Set(listed)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      expect(listed.filter((id) => id === first || id === second || id === third)).toEqual([first, second]);

      await new Memory({ store: s, ttlMs: 0 }).eraseUser(second);
      const after = await allOwners();
      expect(after).toContain(first);
      expect(after).not.toContain(second);
      await expectCode(s.listMemoryOwners({ limit: 0 }), "invalid_request");
    });

    it("imports a memory with its updatedAt and history exactly", async (ctx) => {
      requireNative(ctx, store(), "userMemories");
      const alice = user();
      const id = randomUUID();
      const imported = {
        id,
        userId: alice,
        text: "lives in Utrecht",
        source: { kind: "session" as const, sessionId: "s-9", seqs: [2] },
        metadata: { confidence: 0.8 },
        createdAt: 1_600_000_000_000,
        updatedAt: 1_700_000_000_123,
        history: [
          { text: "lives in Amsterdam", replacedAt: 1_650_000_000_000, reason: "contradiction" },
          { text: "lives in Haarlem", replacedAt: 1_700_000_000_123 },
        ],
      };
      expect(await store().addUserMemory(imported)).toEqual(imported);
      expect(await store().getUserMemory(alice, id)).toEqual(imported);
      // Listed by the imported `updatedAt`, not the time of the import.
      const newer = await store().addUserMemory({ userId: alice, text: "newer", createdAt: 1_700_000_000_124 });
      const older = await store().addUserMemory({ userId: alice, text: "older", createdAt: 1_700_000_000_122 });
      expect((await store().listUserMemories(alice)).memories.map((m) => m.id)).toEqual([newer.id, id, older.id]);
    });

    it("keeps none without the capability: lists are empty and writes are capability_missing", async (ctx) => {
      if (implementsNatively(store(), "userMemories"))
        ctx.skip(`${store().name} keeps memories (this is the fallback's test)`);
      const alice = user();
      expect((await store().listUserMemories(alice)).memories).toEqual([]);
      await expectCode(store().addUserMemory({ userId: alice, text: "x" }), "capability_missing");
      expect(await store().deleteUserMemories(alice)).toBe(0);
    });

    it("erases a user: sessions, messages, search, vectors, state and memories; nobody else's", async () => {
      const s = store();
      const memory = new Memory({ store: s, ttlMs: 0 });
      const alice = user();
      const bob = user();
      const word = `zebra${randomUUID().slice(0, 8)}`;
      const mine = [await newSession(alice), await newSession(alice), await newSession(alice)];
      const theirs = await newSession(bob);
      const firsts = new Map<string, number>();
      for (const session of [...mine, theirs]) {
        const [first] = await s.appendMessages(session.id, [
          text(`about the ${word}`),
          { role: "assistant", content: "noted" },
        ]);
        firsts.set(session.id, first.createdAt);
        if (implementsNatively(s, "summaries"))
          await s.saveSummary(session.id, { fromSeq: 1, toSeq: 2, content: `summary ${word}` });
        if (implementsNatively(s, "state")) await s.setState(session.id, { k: 1 }, 0);
      }
      const vectors = canStoreVectors(s);
      const model = `m-${randomUUID().slice(0, 8)}`;
      if (vectors) {
        for (const session of [...mine, theirs])
          await s.putEmbeddings(session.id, model, [{ seq: 1, createdAt: firsts.get(session.id)!, vector: [1, 0, 0] }]);
      }
      const memories = implementsNatively(s, "userMemories");
      const memoryVectors = memories && canStoreMemoryVectors(s);
      if (memories) {
        const zebras = await s.addUserMemory({ userId: alice, text: "likes zebras" });
        const edited = await s.addUserMemory({ userId: alice, text: "lives in Amsterdam" });
        await s.updateUserMemory(alice, edited.id, { text: "lives in Utrecht" });
        const bobs = await s.addUserMemory({ userId: bob, text: "bob's memory" });
        if (memoryVectors) {
          await s.putUserMemoryEmbeddings(alice, model, [{ id: zebras.id, text: zebras.text, vector: [1, 0, 0] }]);
          await s.putUserMemoryEmbeddings(bob, model, [{ id: bobs.id, text: bobs.text, vector: [1, 0, 0] }]);
        }
      }

      const erased = await memory.eraseUser(alice);
      expect(erased).toEqual({ sessions: 3, memories: memories ? 2 : 0 });

      expect((await s.listSessions(alice)).sessions).toEqual([]);
      for (const session of mine) {
        expect(await s.getSession(session.id)).toBeNull();
        expect(await s.getMessages(session.id)).toEqual([]);
        expect(await s.listSummaries(session.id)).toEqual([]);
      }
      expect(await s.search({ userId: alice, text: word, mode: "substring" })).toEqual([]);
      if (vectors) expect(await s.searchVectors({ userId: alice, model, vector: [1, 0, 0], limit: 10 })).toEqual([]);
      expect((await s.listUserMemories(alice)).memories).toEqual([]);
      if (memoryVectors)
        expect(await s.searchUserMemoryVectors({ userId: alice, model, vector: [1, 0, 0] })).toEqual([]);

      expect((await s.listSessions(bob)).sessions.map((x) => x.id)).toEqual([theirs.id]);
      expect(await s.getMessages(theirs.id)).toHaveLength(2);
      expect((await s.search({ userId: bob, text: word, mode: "substring" })).map((h) => h.sessionId)).toEqual([
        theirs.id,
      ]);
      if (vectors)
        expect(
          (await s.searchVectors({ userId: bob, model, vector: [1, 0, 0], limit: 10 })).map((h) => h.sessionId),
        ).toEqual([theirs.id]);
      if (memories) expect((await s.listUserMemories(bob)).memories.map((m) => m.text)).toEqual(["bob's memory"]);
      if (memoryVectors)
        expect(await s.searchUserMemoryVectors({ userId: bob, model, vector: [1, 0, 0] })).toHaveLength(1);
      expect(await memory.eraseUser(alice)).toEqual({ sessions: 0, memories: 0 });
    });
  });

  describe("memory embeddings", () => {
    const vectors = (ctx: { skip: (reason: string) => void }): FullStore & UserMemoryVectorStore => {
      const s = store();
      requireNative(ctx, s, "userMemories");
      if (!canStoreMemoryVectors(s)) ctx.skip(`${s.name} keeps no embeddings of memories`);
      return s as FullStore & UserMemoryVectorStore;
    };
    // A model name per test: some stores record a model's dimensions store-wide.
    const model = () => `model-${randomUUID()}`;
    const ids = (list: { id: string }[]) => list.map((x) => x.id).sort();

    it("finds the user's nearest memories by model, and never another user's", async (ctx) => {
      const s = vectors(ctx);
      const [alice, bob] = [user(), user()];
      const m = model();
      const car = await s.addUserMemory({ userId: alice, text: "drives a car" });
      const cat = await s.addUserMemory({ userId: alice, text: "has a cat" });
      const plain = await s.addUserMemory({ userId: alice, text: "not embedded yet" });
      const theirs = await s.addUserMemory({ userId: bob, text: "bob drives a truck" });
      expect(ids(await s.missingUserMemoryEmbeddings(alice, m))).toEqual(ids([car, cat, plain]));
      expect(await s.missingUserMemoryEmbeddings(alice, m, 1)).toHaveLength(1);
      await s.putUserMemoryEmbeddings(alice, m, [
        { id: car.id, text: car.text, vector: [2, 0, 0] },
        { id: cat.id, text: cat.text, vector: [0, 1, 0] },
        // Another user's memory id: not alice's, so nothing is stored.
        { id: theirs.id, text: theirs.text, vector: [1, 0, 0] },
      ]);
      expect(await s.missingUserMemoryEmbeddings(alice, m)).toEqual([{ id: plain.id, text: plain.text }]);
      expect(ids(await s.missingUserMemoryEmbeddings(bob, m))).toEqual([theirs.id]);

      const hits = await s.searchUserMemoryVectors({ userId: alice, model: m, vector: [1, 0.1, 0] });
      expect(hits.map((h) => h.id)).toEqual([car.id, cat.id]);
      expect(hits[0].score).toBeCloseTo(1 / Math.sqrt(1.01), 4);
      expect(hits[1].score).toBeCloseTo(0.1 / Math.sqrt(1.01), 4);
      expect(
        (await s.searchUserMemoryVectors({ userId: alice, model: m, vector: [0, 1, 0], limit: 1 })).map((h) => h.id),
      ).toEqual([cat.id]);
      expect(await s.searchUserMemoryVectors({ userId: alice, model: model(), vector: [1, 0, 0] })).toEqual([]);
      expect(await s.searchUserMemoryVectors({ userId: bob, model: m, vector: [1, 0, 0] })).toEqual([]);
      expect(ids(await s.missingUserMemoryEmbeddings(alice, model()))).toEqual(ids([car, cat, plain]));
    });

    it("keeps a vector only for the memory's current text, and forgets it with the memory", async (ctx) => {
      const s = vectors(ctx);
      const alice = user();
      const m = model();
      const moved = await s.addUserMemory({ userId: alice, text: "lives in Amsterdam" });
      const gone = await s.addUserMemory({ userId: alice, text: "has a cat" });
      await s.putUserMemoryEmbeddings(alice, m, [
        { id: moved.id, text: moved.text, vector: [1, 0, 0] },
        { id: gone.id, text: gone.text, vector: [0, 1, 0] },
      ]);
      // Metadata alone leaves the text, and so the vector.
      await s.updateUserMemory(alice, moved.id, { metadata: { checked: true } });
      expect(await s.missingUserMemoryEmbeddings(alice, m)).toEqual([]);

      await s.updateUserMemory(alice, moved.id, { text: "lives in Utrecht" });
      expect(await s.missingUserMemoryEmbeddings(alice, m)).toEqual([{ id: moved.id, text: "lives in Utrecht" }]);
      expect(
        (await s.searchUserMemoryVectors({ userId: alice, model: m, vector: [1, 0, 0] })).map((h) => h.id),
      ).toEqual([gone.id]);
      // A vector made from the old text (an embedding that raced the update) is not kept.
      await s.putUserMemoryEmbeddings(alice, m, [{ id: moved.id, text: "lives in Amsterdam", vector: [1, 0, 0] }]);
      expect(await s.missingUserMemoryEmbeddings(alice, m)).toEqual([{ id: moved.id, text: "lives in Utrecht" }]);
      await s.putUserMemoryEmbeddings(alice, m, [{ id: moved.id, text: "lives in Utrecht", vector: [1, 0, 0] }]);
      expect(
        (await s.searchUserMemoryVectors({ userId: alice, model: m, vector: [1, 0, 0] })).map((h) => h.id),
      ).toEqual([moved.id, gone.id]);

      expect(await s.deleteUserMemory(alice, gone.id)).toBe(true);
      expect(
        (await s.searchUserMemoryVectors({ userId: alice, model: m, vector: [0, 1, 0] })).map((h) => h.id),
      ).toEqual([moved.id]);
      // A vector for a memory deleted meanwhile is not kept either.
      await s.putUserMemoryEmbeddings(alice, m, [{ id: gone.id, text: gone.text, vector: [0, 1, 0] }]);
      expect(
        (await s.searchUserMemoryVectors({ userId: alice, model: m, vector: [0, 1, 0] })).map((h) => h.id),
      ).toEqual([moved.id]);
      // Made again under the same id, a memory starts without a vector.
      await s.addUserMemory({ userId: alice, id: gone.id, text: gone.text });
      expect(await s.missingUserMemoryEmbeddings(alice, m)).toEqual([{ id: gone.id, text: gone.text }]);

      expect(await s.deleteUserMemories(alice)).toBe(2);
      expect(await s.searchUserMemoryVectors({ userId: alice, model: m, vector: [1, 0, 0] })).toEqual([]);
    });

    it("refuses a vector whose length differs from the model's", async (ctx) => {
      const s = vectors(ctx);
      const alice = user();
      const m = model();
      const [a, b] = [
        await s.addUserMemory({ userId: alice, text: "a" }),
        await s.addUserMemory({ userId: alice, text: "b" }),
      ];
      await s.putUserMemoryEmbeddings(alice, m, [{ id: a.id, text: a.text, vector: [1, 0, 0] }]);
      await expectCode(
        s.putUserMemoryEmbeddings(alice, m, [{ id: b.id, text: b.text, vector: [1, 0] }]),
        "embedding_dimension_mismatch",
      );
      await expectCode(
        s.searchUserMemoryVectors({ userId: alice, model: m, vector: [1, 0] }),
        "embedding_dimension_mismatch",
      );
      expect(await s.missingUserMemoryEmbeddings(alice, m)).toEqual([{ id: b.id, text: b.text }]);
    });
  });
}
