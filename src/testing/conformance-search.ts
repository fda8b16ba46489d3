/**
 * Search in the store conformance suite: substring search within one owner's sessions, taken
 * literally, and full-text search (stemmed, ranked) where `capabilities.fullTextSearch` says so.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { FullStore, SearchQuery } from "../core/types.js";
import { expectCode, sessionMaker, text, user } from "./_conformance-fixtures.js";

/** Registers the search tests; `store()` gives the suite's open store, `name` names it in skip reasons. */
export function describeSearch(store: () => FullStore, name: string): void {
  const newSession = sessionMaker(store);

  describe("search", () => {
    it("finds substrings case-insensitively within one owner's sessions", async () => {
      const owner = user();
      const a = await newSession(owner);
      const b = await newSession(owner);
      const stranger = await newSession();
      await store().appendMessages(a.id, [
        text("Create a task: buy GROCERIES"),
        { role: "assistant", content: "Done." },
      ]);
      await store().appendMessages(b.id, [text("Welke producten heb je daarvoor? groceries in het Nederlands")]);
      await store().appendMessages(stranger.id, [text("my groceries are secret")]);
      const hits = await store().search({ userId: owner, text: "groceries" });
      expect(hits.map((h) => h.sessionId).sort()).toEqual([a.id, b.id].sort());
      for (const hit of hits) {
        expect(hit.snippet.toLowerCase()).toContain("groceries");
        expect(hit.message.seq).toBe(hit.seq);
      }
      const inA = await store().search({ userId: owner, sessionId: a.id, text: "GROCERIES" });
      expect(inA.map((h) => h.seq)).toEqual([1]);
      expect(await store().search({ userId: owner, sessionId: stranger.id, text: "groceries" })).toEqual([]);
      expect(await store().search({ userId: owner, text: "daarvoor?" })).toHaveLength(1);
      expect(await store().search({ userId: owner, text: "nothing like this" })).toEqual([]);
    });

    it("treats search text literally and honours the limit", async () => {
      const session = await newSession();
      await store().appendMessages(session.id, [
        text("100% sure"),
        text("under_score"),
        text("it's 'quoted'"),
        ...Array.from({ length: 10 }, (_, i) => text(`repeat ${i}`)),
      ]);
      const q = (t: string, limit?: number) =>
        store().search({ userId: session.userId, sessionId: session.id, text: t, limit });
      expect((await q("%")).map((h) => h.seq)).toEqual([1]);
      expect((await q("_")).map((h) => h.seq)).toEqual([2]);
      expect((await q("'quoted'")).map((h) => h.seq)).toEqual([3]);
      const limited = await q("repeat", 4);
      expect(limited).toHaveLength(4);
      expect(limited.map((h) => h.seq)).toEqual([13, 12, 11, 10]);
    });

    it("rejects empty search text", async () => {
      await expectCode(store().search({ userId: user(), text: "  " }), "invalid_request");
    });

    it("searches full text where the backend has it", async (ctx) => {
      if (!store().capabilities.fullTextSearch) ctx.skip(`${name} has no full-text search`);
      const session = await newSession();
      await store().appendMessages(session.id, [
        text("The quick brown fox jumps over the lazy dog"),
        text("Ik wil boodschappen doen voor morgen"),
        text("nothing relevant"),
      ]);
      const q = (t: string) =>
        store().search({ userId: session.userId, sessionId: session.id, text: t, mode: "fulltext" });
      expect((await q("fox dog")).map((h) => h.seq)).toEqual([1]);
      expect((await q("boodschappen")).map((h) => h.seq)).toEqual([2]);
      expect(await q("elephant")).toEqual([]);
      expect(await q('"unbalanced AND OR (')).toBeInstanceOf(Array);
    });

    it("stems full text (grocery finds groceries) and ranks any-word matches by relevance", async (ctx) => {
      if (!store().capabilities.fullTextSearch) ctx.skip(`${name} has no full-text search`);
      const owner = user();
      const session = await newSession(owner);
      const stranger = await newSession();
      await store().appendMessages(session.id, [
        text("I need to buy groceries today"),
        text("walked the dog in the park"),
        text("grocery list: a grocery store run for the groceries"),
      ]);
      await store().appendMessages(stranger.id, [text("grocery secrets of another owner")]);
      const stemmed = await store().search({ userId: owner, text: "grocery", mode: "fulltext" });
      expect(stemmed.map((h) => h.seq).sort()).toEqual([1, 3]);
      const ranked = await store().search({
        userId: owner,
        text: "grocery list",
        mode: "fulltext",
        ranking: "relevance",
      });
      expect(ranked.map((h) => h.seq)).toEqual([3, 1]);
      const any = await store().search({ userId: owner, text: "grocery dog", mode: "fulltext", ranking: "relevance" });
      expect(any.map((h) => h.seq).sort()).toEqual([1, 2, 3]);
      expect(any.every((h) => h.sessionId === session.id)).toBe(true);
    });

    it("ranks by relevance on every store: any word, rarer and more words first, stemmed, owner's only, limited", async () => {
      const owner = user();
      const session = await newSession(owner);
      const other = await newSession(owner);
      const stranger = await newSession();
      await store().appendMessages(session.id, [
        text("we talked about the weather today"),
        text("the pottery class was about glazing bowls"),
        text("the weather was nice and the weather stayed nice"),
        text("I signed up for pottery"),
      ]);
      // Longer than "I signed up for pottery", so however the store counts "about" against "pottery" (a full-text
      // index may count every owner's rows, some not yet indexed), the message with "pottery" ranks above it.
      await store().appendMessages(other.id, [
        text("weather again, more weather"),
        text("a chat about cooking pasta at home"),
      ]);
      await store().appendMessages(stranger.id, [text("pottery class secrets of another owner")]);
      const ranked = (t: string, limit?: number) =>
        store().search({ userId: owner, text: t, ranking: "relevance", limit });
      // Any word: "pottery" alone matches two messages; with "class" the one holding both comes first.
      const hits = await ranked("What did I say about the pottery class?");
      expect(hits.slice(0, 2).map((h) => h.message.content)).toEqual([
        "the pottery class was about glazing bowls",
        "I signed up for pottery",
      ]);
      // A rare word outweighs a common one: "pottery" (2 of 6 messages) over "weather" (3 of 6).
      const rare = await ranked("weather pottery glazing");
      expect(rare[0].message.content).toBe("the pottery class was about glazing bowls");
      expect(rare.map((h) => h.sessionId)).toContain(other.id);
      expect(rare.every((h) => h.sessionId !== stranger.id)).toBe(true);
      expect(await ranked("weather", 2)).toHaveLength(2);
      // Stemmed and case-folded: "Glazed" finds "glazing", "Classes" finds "class".
      expect((await ranked("Glazed classes")).map((h) => h.message.content)).toEqual([
        "the pottery class was about glazing bowls",
      ]);
      // Stopwords alone find nothing; one session only with sessionId.
      expect(await ranked("what is the")).toEqual([]);
      const inOther = await store().search({
        userId: owner,
        sessionId: other.id,
        text: "weather",
        ranking: "relevance",
      });
      expect(inOther.map((h) => h.seq)).toEqual([1]);
      // Within one session the order holds too (a store may rank a session apart from its owner's
      // index), and another owner's session gives nothing, in any mode the store has.
      const inSession = await store().search({
        userId: owner,
        sessionId: session.id,
        text: "pottery class",
        ranking: "relevance",
      });
      expect(inSession.map((h) => h.message.content)).toEqual([
        "the pottery class was about glazing bowls",
        "I signed up for pottery",
      ]);
      const modes = store().capabilities.fullTextSearch
        ? (["substring", "fulltext"] as const)
        : (["substring"] as const);
      for (const mode of modes) {
        const theirs = await store().search({
          userId: owner,
          sessionId: stranger.id,
          text: "pottery class",
          mode,
          ranking: "relevance",
        });
        expect(theirs, mode).toEqual([]);
      }
    });

    it("keeps to seq bounds in every mode, before ranking and the limit (recall's search of a session)", async () => {
      const owner = user();
      const session = await newSession(owner);
      // Seq 2 is the best match of "apple banana" and lies outside the bounds; seq 5 is the best inside.
      await store().appendMessages(session.id, [
        text("apple one"),
        text("apple banana apple banana"),
        text("apple three"),
        text("apple four"),
        text("apple banana five"),
        text("apple six"),
        text("apple seven"),
        text("apple eight"),
        text("apple nine"),
        text("apple ten banana banana"),
      ]);
      const bounds = { afterSeq: 3, beforeSeq: 9 };
      const search = (extra: Partial<SearchQuery>) =>
        store().search({ userId: owner, sessionId: session.id, text: "apple banana", ...extra });
      const modes = store().capabilities.fullTextSearch
        ? (["substring", "fulltext"] as const)
        : (["substring"] as const);
      for (const mode of modes) {
        // Newest first within the bounds, the limit counted there: 8 and 7, not 10 and 9.
        const newest = await store().search({
          userId: owner,
          sessionId: session.id,
          text: "apple",
          mode,
          ...bounds,
          limit: 2,
        });
        expect(
          newest.map((h) => h.seq),
          mode,
        ).toEqual([8, 7]);
        // Ranked: the best match within the bounds first, where unbounded the best is outside them.
        expect((await search({ mode, ranking: "relevance" }))[0]?.seq, mode).not.toBe(5);
        const ranked = await search({ mode, ranking: "relevance", ...bounds, limit: 3 });
        expect(ranked[0]?.seq, mode).toBe(5);
        expect(ranked.length, mode).toBeGreaterThan(1);
        for (const hit of ranked) expect(hit.seq, mode).toBeGreaterThan(3);
        for (const hit of ranked) expect(hit.seq, mode).toBeLessThan(9);
        // One bound alone, a bound between two seqs, bounds that leave nothing, and across the owner's sessions.
        const after = await store().search({
          userId: owner,
          sessionId: session.id,
          text: "apple",
          mode,
          afterSeq: 8.5,
        });
        expect(
          after.map((h) => h.seq),
          mode,
        ).toEqual([10, 9]);
        const before = await store().search({
          userId: owner,
          sessionId: session.id,
          text: "apple",
          mode,
          beforeSeq: 2.5,
        });
        expect(
          before.map((h) => h.seq),
          mode,
        ).toEqual([2, 1]);
        expect(await search({ mode, ranking: "relevance", afterSeq: 5, beforeSeq: 6 }), mode).toEqual([]);
        const owners = await store().search({ userId: owner, text: "apple", mode, afterSeq: 9 });
        expect(
          owners.map((h) => h.seq),
          mode,
        ).toEqual([10]);
      }
    });

    it("rejects a seq bound that is not a number", async () => {
      const session = await newSession();
      await expectCode(
        store().search({
          userId: session.userId,
          sessionId: session.id,
          text: "apple",
          beforeSeq: "9" as unknown as number,
        }),
        "invalid_request",
      );
      await expectCode(
        store().search({ userId: session.userId, sessionId: session.id, text: "apple", afterSeq: Number.NaN }),
        "invalid_request",
      );
    });

    it("returns the same hits with around, each carrying its neighbours exactly as a read gives them when it carries any", async () => {
      const owner = user();
      const session = await newSession(owner);
      const other = await newSession(owner);
      await store().appendMessages(session.id, [
        text("the harbour was foggy"),
        text("we sailed past the lighthouse"),
        text("lunch on deck"),
        text("the lighthouse keeper waved"),
      ]);
      await store().appendMessages(other.id, [text("a lighthouse postcard")]);
      const query = { userId: owner, text: "lighthouse keeper", ranking: "relevance" as const, limit: 5 };
      const plain = await store().search(query);
      const around = await store().search({ ...query, around: 1 });
      expect(around.map(({ around: _around, ...hit }) => hit)).toEqual(plain);
      expect(plain.length).toBe(3);
      for (const hit of around) {
        if (hit.around === undefined) continue; // a store may leave the neighbours to the caller
        const read = await store().getMessages(hit.sessionId, { fromSeq: hit.seq - 1, toSeq: hit.seq + 1 });
        expect(hit.around, `${hit.sessionId} ${hit.seq}`).toEqual(read);
      }
      expect(plain.every((hit) => hit.around === undefined)).toBe(true);
    });

    it("keeps owners apart whose ids differ only in punctuation or case, in every mode", async () => {
      const tag = randomUUID().slice(0, 8);
      const owners = [`${tag}-x`, `${tag} x`, `${tag}.X`];
      for (const owner of owners)
        await store().appendMessages((await newSession(owner)).id, [text(`lookalike note of ${owner}`)]);
      for (const owner of owners) {
        const modes = store().capabilities.fullTextSearch
          ? (["substring", "fulltext"] as const)
          : (["substring"] as const);
        for (const mode of modes) {
          const hits = await store().search({ userId: owner, text: "lookalike note", mode });
          expect(hits.map((h) => h.message.content)).toEqual([`lookalike note of ${owner}`]);
        }
        if (store().capabilities.fullTextSearch) {
          const ranked = await store().search({
            userId: owner,
            text: "lookalike note",
            mode: "fulltext",
            ranking: "relevance",
          });
          expect(ranked.map((h) => h.message.content)).toEqual([`lookalike note of ${owner}`]);
        }
      }
    });

    it("refuses full text with not_supported where the backend lacks it", async (ctx) => {
      if (store().capabilities.fullTextSearch) ctx.skip(`${name} has full-text search`);
      await expectCode(store().search({ userId: user(), text: "x", mode: "fulltext" }), "not_supported");
    });
  });
}
