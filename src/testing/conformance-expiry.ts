/**
 * Expiry in the store conformance suite. For stores with an inactivity TTL of their own (the memory and
 * Redis stores' `ttlMs`): a session whose last activity is older than the TTL is gone for every call,
 * reads and writes, owner-scoped or not, whether or not a sweep (`expire()`, the memory store's timer,
 * Redis removing the keys) has run yet; no write revives it. Each call on such a session must answer
 * exactly as it does on a session id that never existed. For every store: searches leave out sessions
 * inactive since their `activeSince`, and through `Memory` a session past Memory's TTL is gone the same
 * way before any sweep.
 *
 * The session past a store's own TTL is made with the real clock, then the test's clock (`Date`) is moved past the TTL: the
 * store sees an expired session whose data is all still there (Redis keeps its keys by the server's
 * own clock), the state a sweep has not reached. A store whose TTL runs on another clock than `Date`
 * cannot be tested this way.
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it, vi } from "vitest";
import { isThreadkeepError } from "../core/errors.js";
import { newSessionId } from "../core/ids.js";
import { createMemory } from "../create-memory.js";
import { completeStore, openTurn } from "../core/store/complete.js";
import type { FullStore, VectorStore } from "../core/types.js";
import { expectCode, implementsNatively, text, user } from "./_conformance-fixtures.js";

/** The TTL the expiry tests open the store with. */
export const CONFORMANCE_TTL_MS = 60_000;

/** Opens the store under test with an inactivity TTL of `ttlMs`. */
export type OpenStoreWithTtl = (ttlMs: number) => Promise<FullStore> | FullStore;

/** What a call answered: its value, or the code it failed with. */
async function outcome(call: () => Promise<unknown>): Promise<unknown> {
  try {
    return { value: await call() };
  } catch (error) {
    if (!isThreadkeepError(error)) throw error;
    return { code: error.code };
  }
}

/** Every page of `listAllSessions`, as ids. */
async function allIds(store: FullStore): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const page = await store.listAllSessions({ limit: 500, cursor });
    ids.push(...page.sessions.map((s) => s.id));
    cursor = page.nextCursor;
  } while (cursor);
  return ids;
}

const isVectorStore = (store: FullStore): store is FullStore & VectorStore => store.capabilities.vectors === true;

/**
 * Registers the expiry tests; `store()` gives the suite's open store. `open` opens the store with a
 * TTL; without it (a store that keeps every session until `expire()` or a delete, as the file, SQLite
 * and PostgreSQL stores do) the tests of a session past the store's own TTL are skipped.
 */
export function describeExpiry(store: () => FullStore, name: string, open: OpenStoreWithTtl | undefined): void {
  describe("expiry of inactive sessions", () => {
    it("leaves sessions inactive since activeSince out of searches", async () => {
      const s = store();
      const owner = user();
      const model = `expiry-${randomUUID()}`;
      const make = async (content: string) => {
        const session = await s.createSession({ id: newSessionId(), userId: owner });
        const [message] = await s.appendMessages(session.id, [text(content)]);
        if (isVectorStore(s))
          await s.putEmbeddings(session.id, model, [{ seq: 1, createdAt: message.createdAt, vector: [1, 0] }]);
        return session.id;
      };
      const old = await make("needle in the old haystack");
      const fresh = await make("needle in the new haystack");
      await s.touchSession(old, Date.now() - 10 * 60_000);
      const activeSince = Date.now() - 5 * 60_000;
      const found = async (query: { sessionId?: string; activeSince?: number }) => {
        const ids: string[][] = [];
        for (const mode of s.capabilities.fullTextSearch
          ? (["substring", "fulltext"] as const)
          : (["substring"] as const)) {
          ids.push((await s.search({ userId: owner, text: "needle", mode, ...query })).map((h) => h.sessionId).sort());
          if (mode === "fulltext")
            ids.push(
              (await s.search({ userId: owner, text: "needle", mode, ranking: "relevance", ...query }))
                .map((h) => h.sessionId)
                .sort(),
            );
        }
        if (isVectorStore(s))
          ids.push(
            (await s.searchVectors({ userId: owner, model, vector: [1, 0], ...query })).map((h) => h.sessionId).sort(),
          );
        return ids;
      };
      const all = await found({});
      expect(
        all.every((ids) => ids.length === 2),
        JSON.stringify(all),
      ).toBe(true);
      for (const ids of await found({ activeSince })) expect(ids).toEqual([fresh]);
      for (const ids of await found({ activeSince, sessionId: old })) expect(ids).toEqual([]);
      for (const ids of await found({ activeSince, sessionId: fresh })) expect(ids).toEqual([fresh]);
    });

    it("through Memory, a session past Memory's TTL is gone before any sweep, and a write starts it anew", async () => {
      const s = store();
      const memory = createMemory({ store: s, ttlMs: CONFORMANCE_TTL_MS });
      const owner = user();
      const id = newSessionId();
      await memory.addMessages(id, [text("find me later"), { role: "assistant", content: "found" }], { userId: owner });
      if (implementsNatively(s, "state")) await memory.updateState(id, () => ({ step: 1 }), { userId: owner });
      await s.touchSession(id, Date.now() - CONFORMANCE_TTL_MS - 60_000);
      const live = await memory.startSession({ userId: owner });
      expect((await memory.listSessions({ userId: owner })).sessions.map((x) => x.id)).toEqual([live.id]);
      const paged: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await memory.listSessions({ userId: owner, limit: 1, cursor });
        paged.push(...page.sessions.map((x) => x.id));
        cursor = page.nextCursor;
      } while (cursor);
      expect(paged).toEqual([live.id]);
      expect(await memory.search("find me", { userId: owner })).toEqual([]);
      await expectCode(memory.getSession(id, { userId: owner }), "session_not_found");
      await expectCode(memory.getMessages(id, { userId: owner, last: 20 }), "session_not_found");
      const [first] = await memory.addMessages(id, [text("a new start")], { userId: owner });
      expect(first.seq).toBe(1);
      expect((await memory.getMessages(id, { userId: owner })).map((m) => m.content)).toEqual(["a new start"]);
      expect(await memory.getState(id, { userId: owner })).toEqual({ version: 0, data: {} });
      expect((await memory.listSessions({ userId: owner })).sessions.map((x) => x.id).sort()).toEqual(
        [id, live.id].sort(),
      );
    });
  });

  describe("a session past the store's own TTL", () => {
    const skip = open
      ? undefined
      : `${name} has no TTL of its own: it keeps sessions until expire() (Memory applies its TTL)`;
    let opened: FullStore | undefined;
    afterEach(async () => {
      vi.useRealTimers();
      await opened?.close();
      opened = undefined;
    });

    /**
     * A session of one owner with messages, a branch, a summary, state and (on a vector store) an
     * embedding, then the clock moved past its TTL; and an id that was never used, to compare with.
     */
    const model = `expiry-${randomUUID()}`;
    const lapsed = async () => {
      const store = (opened = await open!(CONFORMANCE_TTL_MS));
      const owner = user();
      const session = await store.createSession({ id: newSessionId(), userId: owner, metadata: { title: "old" } });
      const id = session.id;
      await store.appendMessages(id, [text("find me later"), { role: "assistant", content: "first answer" }]);
      await store.replaceAfter(id, 1, [{ role: "assistant", content: "second answer" }], {
        branch: { reason: "regenerate" },
      });
      await store.saveSummary(id, { fromSeq: 1, toSeq: 2, content: "a summary" });
      await store.setState(id, { step: 1 }, 0);
      if (isVectorStore(store))
        await store.putEmbeddings(id, model, [
          { seq: 1, createdAt: (await store.getMessages(id))[0].createdAt, vector: [1, 0] },
        ]);
      const { createdAt } = (await store.getSession(id))!;
      const branchId = (await store.listBranches(id))[0].id;
      // Time passes: past the TTL, before anything has swept the session away.
      vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true });
      vi.setSystemTime(Date.now() + CONFORMANCE_TTL_MS + 1_000);
      // And a session of the same owner active now.
      const live = await store.createSession({ id: newSessionId(), userId: owner });
      return { store, owner, id, live: live.id, createdAt, branchId, missing: newSessionId() };
    };

    it("is gone for every read, owner-scoped or not", async (ctx) => {
      if (skip) return ctx.skip(skip);
      const { store, owner, id, live, missing } = await lapsed();
      const reads: [string, (sessionId: string) => Promise<unknown>][] = [
        ["getSession", (s) => store.getSession(s)],
        ["getSessions", (s) => completeStore(store).getSessions([s])],
        ["getMessages", (s) => store.getMessages(s)],
        ["getMessages last", (s) => store.getMessages(s, { last: 20 })],
        ["getMessages range", (s) => store.getMessages(s, { fromSeq: 1, toSeq: 5 })],
        ["getMessages limit", (s) => store.getMessages(s, { limit: 1 })],
        ["countMessages", (s) => store.countMessages(s)],
        ["listSummaries", (s) => store.listSummaries(s)],
        ["listBranches", (s) => store.listBranches(s)],
        ["getState", (s) => store.getState(s)],
        ["search in the session", (s) => store.search({ userId: owner, sessionId: s, text: "find me" })],
      ];
      reads.push([
        "getMessageRanges",
        (s) => completeStore(store).getMessageRanges([{ sessionId: s, fromSeq: 1, toSeq: 5 }], { userId: owner }),
      ]);
      if (store.capabilities.ownerScope) {
        reads.push(
          ["getMessages owner-scoped", (s) => store.getMessages(s, { last: 20, owner: { userId: owner } })],
          ["getMessages owner-scoped range", (s) => store.getMessages(s, { fromSeq: 1, owner: { userId: owner } })],
        );
      }
      if (isVectorStore(store)) {
        reads.push(
          ["missingEmbeddings", (s) => store.missingEmbeddings(s, model)],
          [
            "searchVectors in the session",
            (s) => store.searchVectors({ userId: owner, sessionId: s, model: model, vector: [1, 0] }),
          ],
        );
      }
      for (const [call, read] of reads)
        expect(await outcome(() => read(id)), call).toEqual(await outcome(() => read(missing)));
      expect(await store.search({ userId: owner, text: "find me" })).toEqual([]);
      if (isVectorStore(store))
        expect(await store.searchVectors({ userId: owner, model: model, vector: [1, 0] })).toEqual([]);
      expect((await store.listSessions(owner)).sessions.map((s) => s.id)).toEqual([live]);
      expect(await allIds(store)).not.toContain(id);
    });

    it("opens no turn on it, with or without activeSince", async (ctx) => {
      if (skip) return ctx.skip(skip);
      const { store, owner, id } = await lapsed();
      for (const activeSince of [undefined, Date.now() - 2 * CONFORMANCE_TTL_MS]) {
        const turn = await openTurn(store, id, {
          owner: { userId: owner, activeSince },
          lease: { ttlMs: 5_000 },
          last: 20,
        });
        await turn.lease.release();
        expect({ ...turn, lease: undefined }, `activeSince ${activeSince}`).toEqual({
          lease: undefined,
          status: "missing",
          session: null,
          messages: [],
          summaries: [],
          state: { version: 0, data: {} },
        });
      }
    });

    it("refuses every write as a missing session's, and no write revives it", async (ctx) => {
      if (skip) return ctx.skip(skip);
      const { store, owner, id, createdAt, branchId, missing } = await lapsed();
      const writes: [string, (sessionId: string) => Promise<unknown>][] = [
        ["appendMessages", (s) => store.appendMessages(s, [text("too late")])],
        [
          "appendMessages owner-scoped",
          (s) => store.appendMessages(s, [text("too late")], { owner: { userId: owner } }),
        ],
        [
          "appendMessages with an operation id",
          (s) => store.appendMessages(s, [text("too late")], { operationId: "late-1" }),
        ],
        ["appendMessages empty, capping", (s) => store.appendMessages(s, [], { maxMessages: 1 })],
        ["replaceAfter", (s) => store.replaceAfter(s, 1, [text("too late")])],
        ["popMessage", (s) => store.popMessage(s)],
        ["truncateAfter", (s) => store.truncateAfter(s, 0)],
        ["touchSession", (s) => store.touchSession(s)],
        ["touchSession at now", (s) => store.touchSession(s, Date.now())],
        ["updateSessionMetadata", (s) => store.updateSessionMetadata(s, { title: "revived" })],
        ["switchBranch", (s) => store.switchBranch(s, branchId)],
        [
          "saveBranch",
          (s) => store.saveBranch(s, { atSeq: 0, parentId: null, reason: "fork", createdAt: Date.now(), messages: [] }),
        ],
        ["saveSummary", (s) => store.saveSummary(s, { fromSeq: 1, toSeq: 1, content: "late" })],
        ["setState", (s) => store.setState(s, { step: 2 }, 1)],
        ["setState from 0", (s) => store.setState(s, { step: 2 }, 0)],
      ];
      if (implementsNatively(store, "summaries")) {
        writes.push([
          "saveSummary guarded",
          (s) => store.saveSummary(s, { fromSeq: 1, toSeq: 1, content: "late", sessionCreatedAt: createdAt }),
        ]);
      }
      if (isVectorStore(store)) {
        writes.push(["putEmbeddings", (s) => store.putEmbeddings(s, model, [{ seq: 1, createdAt, vector: [0, 1] }])]);
      }
      for (const [call, write] of writes) {
        expect(await outcome(() => write(id)), call).toEqual(await outcome(() => write(missing)));
        expect(await store.getSession(id), `after ${call}`).toBeNull();
      }
      expect(await store.getMessages(id)).toEqual([]);
      expect(await store.getSession(missing)).toBeNull();
      expect((await store.listSessions(owner)).sessions.map((s) => s.id)).not.toContain(id);
    });

    it("frees its id: a session created under it starts empty", async (ctx) => {
      if (skip) return ctx.skip(skip);
      const { store, owner, id } = await lapsed();
      const again = await store.createSession({ id, userId: owner });
      expect(again.metadata).toEqual({});
      expect(await store.getSession(id)).toMatchObject({ id, userId: owner, metadata: {} });
      expect(await store.getMessages(id)).toEqual([]);
      expect(await store.countMessages(id)).toBe(0);
      expect(await store.listSummaries(id)).toEqual([]);
      expect(await store.listBranches(id)).toEqual([]);
      expect(await store.getState(id)).toEqual({ version: 0, data: {} });
      expect(await store.search({ userId: owner, sessionId: id, text: "find me" })).toEqual([]);
      expect((await store.appendMessages(id, [text("new")]))[0].seq).toBe(1);
      expect((await store.getMessages(id)).map((m) => m.content)).toEqual(["new"]);
    });

    it("is not there to delete", async (ctx) => {
      if (skip) return ctx.skip(skip);
      const { store, id } = await lapsed();
      expect(await store.deleteSession(id)).toBe(false);
      expect(await store.getSession(id)).toBeNull();
    });
  });
}
