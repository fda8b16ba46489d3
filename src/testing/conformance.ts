/**
 * The store conformance suite: every backend runs these same assertions through `runStoreConformance`,
 * the five built-in stores and any third-party store alike (published as `threadkeep/testing`; it runs
 * under vitest, an optional peer dependency of this subpath only).
 * A backend that lacks a feature declares it in `capabilities` and the matching tests are skipped;
 * an assertion is never loosened for one backend.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isThreadkeepError, type ErrorCode } from "../core/errors.js";
import { newSessionId } from "../core/ids.js";
import type { MessageInput, SessionStore } from "../core/types.js";
import { describeSummaryBoundedCap } from "./conformance-cap.js";
import { describeHistory } from "./conformance-history.js";
import { describeVectors } from "./conformance-vectors.js";
import { describeOwnerScope } from "./conformance-owner.js";
import { describeTurns } from "./conformance-turn.js";

/**
 * Opens the store under test. Called more than once where a second "process" or a reopen is needed:
 * a persistent store must open the same data each time.
 */
export type OpenStore = () => Promise<SessionStore> | SessionStore;

/** Options of {@link runStoreConformance}. */
export interface ConformanceOptions {
  /** True to run; a string is the reason the suite is skipped (printed). @default true */
  enabled?: true | string;
}

/** Asserts that `promise` rejects with a ThreadkeepError of `code`. */
export async function expectCode(promise: Promise<unknown>, code: ErrorCode): Promise<void> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  expect(caught, `expected a ${code} error`).toBeDefined();
  expect(isThreadkeepError(caught) ? caught.code : caught).toBe(code);
}

const user = () => `user-${randomUUID()}`;
const text = (content: string): MessageInput => ({ role: "user", content });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Declares the conformance suite for one store (call it at the top level of a vitest test file).
 * @param name Shown in the test names.
 * @param openStore Opens the store; see {@link OpenStore}.
 */
export function runStoreConformance(name: string, openStore: OpenStore, options: ConformanceOptions = {}): void {
  const target = { name, create: openStore };
  const enabled = options.enabled ?? true;
  if (enabled !== true) {
    console.warn(`[conformance] skipping ${target.name}: ${enabled}`);
    describe.skip(`${target.name} store conformance (${enabled})`, () => {
      it("is skipped", () => {});
    });
    return;
  }

  describe(`${target.name} store conformance`, () => {
    let store: SessionStore;
    beforeAll(async () => {
      store = await target.create();
    });
    afterAll(async () => {
      await store?.close();
    });

    const newSession = async (userId = user(), extra: { lastActivityAt?: number } = {}) => {
      return store.createSession({ id: newSessionId(), userId, ...extra });
    };

    describe("sessions", () => {
      it("creates, reads and refuses a duplicate id", async () => {
        const userId = user();
        const before = Date.now();
        const created = await store.createSession({ id: newSessionId(), userId, metadata: { title: "Groceries" } });
        expect(created.userId).toBe(userId);
        expect(created.createdAt).toBeGreaterThanOrEqual(before - 1000);
        expect(created.lastActivityAt).toBe(created.createdAt);
        expect(await store.getSession(created.id)).toEqual(created);
        await expectCode(store.createSession({ id: created.id, userId: user() }), "session_exists");
        expect((await store.getSession(created.id))?.userId).toBe(userId);
      });

      it("returns null for a missing session and not_found for writes to it", async () => {
        const id = newSessionId();
        expect(await store.getSession(id)).toBeNull();
        expect(await store.getMessages(id)).toEqual([]);
        await expectCode(store.appendMessages(id, [text("hi")]), "session_not_found");
        await expectCode(store.touchSession(id), "session_not_found");
        await expectCode(store.setState(id, {}, 0), "session_not_found");
        expect(await store.deleteSession(id)).toBe(false);
      });

      it("returns copies, never its own objects", async () => {
        const session = await store.createSession({ id: newSessionId(), userId: user(), metadata: { a: 1 } });
        session.metadata.a = 2;
        expect((await store.getSession(session.id))?.metadata).toEqual({ a: 1 });
        const [message] = await store.appendMessages(session.id, [text("original")]);
        message.content = "changed";
        const [read] = await store.getMessages(session.id);
        read.content = "changed again";
        expect((await store.getMessages(session.id))[0].content).toBe("original");
      });

      it("updates metadata and touches", async () => {
        const session = await newSession(user(), { lastActivityAt: 1_000 });
        const updated = await store.updateSessionMetadata(session.id, { title: "Renamed", tags: ["x"] });
        expect(updated.metadata).toEqual({ title: "Renamed", tags: ["x"] });
        await store.touchSession(session.id, 5_000);
        expect((await store.getSession(session.id))?.lastActivityAt).toBe(5_000);
        const now = Date.now();
        await store.touchSession(session.id);
        expect((await store.getSession(session.id))!.lastActivityAt).toBeGreaterThanOrEqual(now - 1000);
      });

      it("deletes a session with its messages, summaries and state", async () => {
        const session = await newSession();
        await store.appendMessages(session.id, [text("a"), text("b")]);
        await store.saveSummary(session.id, { fromSeq: 1, toSeq: 1, content: "s" });
        await store.setState(session.id, { k: 1 }, 0);
        expect(await store.deleteSession(session.id)).toBe(true);
        expect(await store.getSession(session.id)).toBeNull();
        expect(await store.getMessages(session.id)).toEqual([]);
        expect(await store.listSummaries(session.id)).toEqual([]);
        // Recreating the id starts from nothing.
        await store.createSession({ id: session.id, userId: session.userId });
        expect(await store.countMessages(session.id)).toBe(0);
        expect(await store.getState(session.id)).toEqual({ version: 0, data: {} });
        const [first] = await store.appendMessages(session.id, [text("again")]);
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
          const page = await store.listSessions(owner, { limit: 3, cursor });
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
        await store.appendMessages(old.id, [text("back again")]);
        const page = await store.listSessions(owner);
        expect(page.sessions[0].id).toBe(old.id);
        expect(page.nextCursor).toBeNull();
      });

      it("lists every owner's sessions by id for export and migration", async () => {
        const mine = await Promise.all([user(), user(), user(), user(), user()].map((u) => newSession(u)));
        const seen: string[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const page = await store.listAllSessions({ limit: 7, cursor });
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
        expect(await store.listSessions(user())).toEqual({ sessions: [], nextCursor: null });
      });
    });

    describe("messages", () => {
      it("assigns contiguous seq from 1 and round-trips OpenAI messages losslessly", async () => {
        const session = await newSession();
        const inputs: MessageInput[] = [
          { role: "system", content: "You are terse." },
          { role: "user", content: [{ type: "text", text: "What is on my list?" }], name: "alice" },
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "call_1", type: "function", function: { name: "list_tasks", arguments: '{"all":true}' } }],
            refusal: null,
          },
          { role: "tool", tool_call_id: "call_1", content: '[{"id":42,"title":"buy groceries"}]' },
          { role: "assistant", content: "Task 42: buy groceries.", metadata: { model: "m1" }, incomplete: true },
        ];
        const stored = await store.appendMessages(session.id, inputs);
        expect(stored.map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);
        const read = await store.getMessages(session.id);
        expect(read).toEqual(stored);
        read.forEach((m, i) => {
          const { seq, createdAt, ...rest } = m;
          expect(rest).toEqual(inputs[i]);
          expect(typeof createdAt).toBe("number");
          expect(seq).toBe(i + 1);
        });
        const more = await store.appendMessages(session.id, [text("next")]);
        expect(more[0].seq).toBe(6);
        expect(await store.countMessages(session.id)).toBe(6);
      });

      it("reads the last N, ranges, and before a seq", async () => {
        const session = await newSession();
        await store.appendMessages(session.id, Array.from({ length: 30 }, (_, i) => text(`m${i + 1}`)));
        const seqs = async (q: Parameters<SessionStore["getMessages"]>[1]) =>
          (await store.getMessages(session.id, q)).map((m) => m.seq);
        expect(await seqs({ last: 3 })).toEqual([28, 29, 30]);
        expect(await seqs({ afterSeq: 27 })).toEqual([28, 29, 30]);
        expect(await seqs({ afterSeq: 10, limit: 2 })).toEqual([11, 12]);
        expect(await seqs({ fromSeq: 5, toSeq: 7 })).toEqual([5, 6, 7]);
        expect(await seqs({ beforeSeq: 4 })).toEqual([1, 2, 3]);
        expect(await seqs({ beforeSeq: 20, last: 2 })).toEqual([18, 19]);
        expect(await seqs({ last: 0 })).toEqual([]);
        expect((await seqs({})).length).toBe(30);
        expect((await store.getMessages(session.id, { last: 1 }))[0].content).toBe("m30");
      });

      it("rejects a bad batch whole and stores nothing of it", async () => {
        const session = await newSession();
        await store.appendMessages(session.id, [text("kept")]);
        const bad = [text("fine"), { role: "wizard", content: "x" }] as unknown as MessageInput[];
        await expectCode(store.appendMessages(session.id, bad), "invalid_message");
        await expectCode(
          store.appendMessages(session.id, [{ role: "user", content: 42 } as unknown as MessageInput]),
          "invalid_message",
        );
        await expectCode(
          store.appendMessages(session.id, [{ role: "tool", content: "no id" } as MessageInput]),
          "invalid_message",
        );
        expect((await store.getMessages(session.id)).map((m) => m.content)).toEqual(["kept"]);
      });

      it("keeps seq contiguous under 100 concurrent appends", async () => {
        const session = await newSession();
        await Promise.all(Array.from({ length: 100 }, (_, i) => store.appendMessages(session.id, [text(`c${i}`)])));
        const all = await store.getMessages(session.id);
        expect(all.map((m) => m.seq)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
        expect(new Set(all.map((m) => m.content)).size).toBe(100);
      });

      it("keeps each concurrent batch adjacent", async () => {
        const session = await newSession();
        await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            store.appendMessages(session.id, [text(`q${i}`), { role: "assistant", content: `a${i}` }]),
          ),
        );
        const all = await store.getMessages(session.id);
        expect(all).toHaveLength(40);
        for (let i = 0; i < all.length; i += 2) {
          expect(all[i].role).toBe("user");
          expect(all[i + 1].content).toBe(`a${String(all[i].content).slice(1)}`);
        }
      });

      it("isolates sessions", async () => {
        const a = await newSession();
        const b = await newSession();
        await store.appendMessages(a.id, [text("only in a")]);
        await store.appendMessages(b.id, [text("only in b"), text("b2")]);
        expect((await store.getMessages(a.id)).map((m) => m.content)).toEqual(["only in a"]);
        expect(await store.countMessages(b.id)).toBe(2);
        expect((await store.appendMessages(a.id, [text("a2")]))[0].seq).toBe(2);
      });

      it("pops the last message and truncates after a seq", async () => {
        const session = await newSession();
        expect(await store.popMessage(session.id)).toBeNull();
        await store.appendMessages(session.id, [text("1"), text("2"), text("3"), text("4"), text("5")]);
        const popped = await store.popMessage(session.id);
        expect(popped?.seq).toBe(5);
        expect(popped?.content).toBe("5");
        expect(await store.truncateAfter(session.id, 2)).toBe(2);
        expect(await store.truncateAfter(session.id, 2)).toBe(0);
        expect((await store.getMessages(session.id)).map((m) => m.seq)).toEqual([1, 2]);
        const [next] = await store.appendMessages(session.id, [text("again")]);
        expect(next.seq).toBe(3);
      });

      it("keeps unicode and 1 MB messages intact", async () => {
        const session = await newSession();
        const samples = ["Welke producten heb je daarvoor? 🍎🥦", "日本語のテキスト", "مرحبا بالعالم", "a\u0000b\u2028c", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \"quotes\" 'single' \\ back"];
        const big = "x".repeat(1024 * 1024 - 8) + "🦄end";
        await store.appendMessages(session.id, [...samples.map(text), text(big)]);
        const read = await store.getMessages(session.id);
        expect(read.map((m) => m.content)).toEqual([...samples, big]);
      });
    });

    describe("retention", () => {
      it("caps messages per session in the same step as the append", async () => {
        const session = await newSession();
        await store.appendMessages(session.id, [text("1"), text("2"), text("3")], { maxMessages: 5 });
        await store.appendMessages(session.id, [text("4"), text("5"), text("6"), text("7"), text("8")], { maxMessages: 5 });
        const all = await store.getMessages(session.id);
        expect(all.map((m) => m.seq)).toEqual([4, 5, 6, 7, 8]);
        expect(await store.countMessages(session.id)).toBe(5);
        const [next] = await store.appendMessages(session.id, [text("9")], { maxMessages: 5 });
        expect(next.seq).toBe(9);
        expect((await store.getMessages(session.id, { last: 20 }))[0].seq).toBe(5);
      });

      it("applies the cap on an empty append (compaction trims without adding)", async () => {
        const session = await newSession();
        await store.appendMessages(session.id, Array.from({ length: 8 }, (_, i) => text(`m${i + 1}`)));
        expect(await store.appendMessages(session.id, [], { maxMessages: 3 })).toEqual([]);
        expect((await store.getMessages(session.id)).map((m) => m.seq)).toEqual([6, 7, 8]);
        expect((await store.appendMessages(session.id, [text("next")]))[0].seq).toBe(9);
      });

      it("expires inactive sessions and returns their ids", async () => {
        const owner = user();
        const now = Date.now();
        const stale = await newSession(owner, { lastActivityAt: now - 10 * 86_400_000 });
        await store.appendMessages(stale.id, [text("old")]);
        await store.touchSession(stale.id, now - 10 * 86_400_000);
        const fresh = await newSession(owner);
        const removed = await store.expire(now - 7 * 86_400_000);
        expect(removed).toContain(stale.id);
        expect(removed).not.toContain(fresh.id);
        expect(await store.getSession(stale.id)).toBeNull();
        expect(await store.getMessages(stale.id)).toEqual([]);
        expect(await store.getSession(fresh.id)).not.toBeNull();
        expect((await store.listSessions(owner)).sessions.map((s) => s.id)).toEqual([fresh.id]);
      });
    });

    describe("summaries and state", () => {
      it("saves and lists summaries in seq order", async () => {
        const session = await newSession();
        const later = await store.saveSummary(session.id, { fromSeq: 11, toSeq: 20, content: "second part" });
        const first = await store.saveSummary(session.id, { fromSeq: 1, toSeq: 10, content: "first part", metadata: { model: "m" } });
        expect(first.id).not.toBe(later.id);
        const list = await store.listSummaries(session.id);
        expect(list.map((s) => [s.fromSeq, s.toSeq, s.content])).toEqual([
          [1, 10, "first part"],
          [11, 20, "second part"],
        ]);
        expect(list[0].metadata).toEqual({ model: "m" });
      });

      it("compares and sets state by version", async () => {
        const session = await newSession();
        expect(await store.getState(session.id)).toEqual({ version: 0, data: {} });
        const v1 = await store.setState(session.id, { intent: "create_task", entities: ["task:42"] }, 0);
        expect(v1).toEqual({ version: 1, data: { intent: "create_task", entities: ["task:42"] } });
        await expectCode(store.setState(session.id, { intent: "lost" }, 0), "state_conflict");
        expect((await store.getState(session.id)).data.intent).toBe("create_task");
      });

      it("lets exactly one of many concurrent compare-and-sets win", async () => {
        const session = await newSession();
        await store.setState(session.id, { n: 0 }, 0);
        const results = await Promise.allSettled(
          Array.from({ length: 10 }, (_, i) => store.setState(session.id, { n: i + 1 }, 1)),
        );
        const won = results.filter((r) => r.status === "fulfilled");
        expect(won).toHaveLength(1);
        for (const r of results) if (r.status === "rejected") expect(r.reason.code).toBe("state_conflict");
        expect((await store.getState(session.id)).version).toBe(2);
      });
    });

    describe("search", () => {
      it("finds substrings case-insensitively within one owner's sessions", async () => {
        const owner = user();
        const a = await newSession(owner);
        const b = await newSession(owner);
        const stranger = await newSession();
        await store.appendMessages(a.id, [text("Create a task: buy GROCERIES"), { role: "assistant", content: "Done." }]);
        await store.appendMessages(b.id, [text("Welke producten heb je daarvoor? groceries in het Nederlands")]);
        await store.appendMessages(stranger.id, [text("my groceries are secret")]);
        const hits = await store.search({ userId: owner, text: "groceries" });
        expect(hits.map((h) => h.sessionId).sort()).toEqual([a.id, b.id].sort());
        for (const hit of hits) {
          expect(hit.snippet.toLowerCase()).toContain("groceries");
          expect(hit.message.seq).toBe(hit.seq);
        }
        const inA = await store.search({ userId: owner, sessionId: a.id, text: "GROCERIES" });
        expect(inA.map((h) => h.seq)).toEqual([1]);
        expect(await store.search({ userId: owner, sessionId: stranger.id, text: "groceries" })).toEqual([]);
        expect(await store.search({ userId: owner, text: "daarvoor?" })).toHaveLength(1);
        expect(await store.search({ userId: owner, text: "nothing like this" })).toEqual([]);
      });

      it("treats search text literally and honours the limit", async () => {
        const session = await newSession();
        await store.appendMessages(session.id, [
          text("100% sure"),
          text("under_score"),
          text("it's 'quoted'"),
          ...Array.from({ length: 10 }, (_, i) => text(`repeat ${i}`)),
        ]);
        const q = (t: string, limit?: number) => store.search({ userId: session.userId, sessionId: session.id, text: t, limit });
        expect((await q("%")).map((h) => h.seq)).toEqual([1]);
        expect((await q("_")).map((h) => h.seq)).toEqual([2]);
        expect((await q("'quoted'")).map((h) => h.seq)).toEqual([3]);
        const limited = await q("repeat", 4);
        expect(limited).toHaveLength(4);
        expect(limited.map((h) => h.seq)).toEqual([13, 12, 11, 10]);
      });

      it("rejects empty search text", async () => {
        await expectCode(store.search({ userId: user(), text: "  " }), "invalid_request");
      });

      it("searches full text where the backend has it", async (ctx) => {
        if (!store.capabilities.fullTextSearch) ctx.skip(`${target.name} has no full-text search`);
        const session = await newSession();
        await store.appendMessages(session.id, [
          text("The quick brown fox jumps over the lazy dog"),
          text("Ik wil boodschappen doen voor morgen"),
          text("nothing relevant"),
        ]);
        const q = (t: string) => store.search({ userId: session.userId, sessionId: session.id, text: t, mode: "fulltext" });
        expect((await q("fox dog")).map((h) => h.seq)).toEqual([1]);
        expect((await q("boodschappen")).map((h) => h.seq)).toEqual([2]);
        expect(await q("elephant")).toEqual([]);
        expect(await q('"unbalanced AND OR (')).toBeInstanceOf(Array);
      });

      it("stems full text (grocery finds groceries) and ranks any-word matches by relevance", async (ctx) => {
        if (!store.capabilities.fullTextSearch) ctx.skip(`${target.name} has no full-text search`);
        const owner = user();
        const session = await newSession(owner);
        const stranger = await newSession();
        await store.appendMessages(session.id, [
          text("I need to buy groceries today"),
          text("walked the dog in the park"),
          text("grocery list: a grocery store run for the groceries"),
        ]);
        await store.appendMessages(stranger.id, [text("grocery secrets of another owner")]);
        const stemmed = await store.search({ userId: owner, text: "grocery", mode: "fulltext" });
        expect(stemmed.map((h) => h.seq).sort()).toEqual([1, 3]);
        const ranked = await store.search({ userId: owner, text: "grocery list", mode: "fulltext", ranking: "relevance" });
        expect(ranked.map((h) => h.seq)).toEqual([3, 1]);
        const any = await store.search({ userId: owner, text: "grocery dog", mode: "fulltext", ranking: "relevance" });
        expect(any.map((h) => h.seq).sort()).toEqual([1, 2, 3]);
        expect(any.every((h) => h.sessionId === session.id)).toBe(true);
      });

      it("keeps owners apart whose ids differ only in punctuation or case, in every mode", async () => {
        const tag = randomUUID().slice(0, 8);
        const owners = [`${tag}-x`, `${tag} x`, `${tag}.X`];
        for (const owner of owners) await store.appendMessages((await newSession(owner)).id, [text(`lookalike note of ${owner}`)]);
        for (const owner of owners) {
          const modes = store.capabilities.fullTextSearch ? (["substring", "fulltext"] as const) : (["substring"] as const);
          for (const mode of modes) {
            const hits = await store.search({ userId: owner, text: "lookalike note", mode });
            expect(hits.map((h) => h.message.content)).toEqual([`lookalike note of ${owner}`]);
          }
          if (store.capabilities.fullTextSearch) {
            const ranked = await store.search({ userId: owner, text: "lookalike note", mode: "fulltext", ranking: "relevance" });
            expect(ranked.map((h) => h.message.content)).toEqual([`lookalike note of ${owner}`]);
          }
        }
      });

      it("refuses full text with not_supported where the backend lacks it", async (ctx) => {
        if (store.capabilities.fullTextSearch) ctx.skip(`${target.name} has full-text search`);
        await expectCode(store.search({ userId: user(), text: "x", mode: "fulltext" }), "not_supported");
      });
    });

    describe("turn lease", () => {
      it("grants turns one at a time in arrival order", async () => {
        const session = await newSession();
        const order: number[] = [];
        const first = await store.acquireLease(session.id);
        const waiters = [1, 2, 3].map(async (n) => {
          const lease = await store.acquireLease(session.id, { waitMs: 10_000 });
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
        const held = await store.acquireLease(session.id, { ttlMs: 10_000 });
        await expectCode(store.acquireLease(session.id, { waitMs: 100 }), "session_busy");
        await held.release();
        const next = await store.acquireLease(session.id, { waitMs: 1000 });
        await next.release();
      });

      it("lets a lapsed lease go and fences its holder out", async () => {
        const session = await newSession();
        const stale = await store.acquireLease(session.id, { ttlMs: 150 });
        const fresh = await store.acquireLease(session.id, { waitMs: 5_000, ttlMs: 10_000 });
        expect(fresh.fence).toBeGreaterThan(stale.fence);
        await expectCode(store.appendMessages(session.id, [text("late")], { fence: stale.fence }), "lease_expired");
        await store.appendMessages(session.id, [text("current")], { fence: fresh.fence });
        await stale.release();
        expect((await store.getMessages(session.id)).map((m) => m.content)).toEqual(["current"]);
        await fresh.release();
      });

      it("renews a lease past its first lifetime, so a long turn keeps its session", async () => {
        const session = await newSession();
        const lease = await store.acquireLease(session.id, { ttlMs: 500 });
        await sleep(300);
        expect(await lease.renew(1_500)).toBe(true);
        expect(lease.expiresAt).toBeGreaterThan(Date.now() + 1_000);
        await sleep(400);
        await expectCode(store.acquireLease(session.id, { waitMs: 50 }), "session_busy");
        await store.appendMessages(session.id, [text("still mine")], { fence: lease.fence });
        await lease.release();
        const next = await store.acquireLease(session.id, { waitMs: 1000 });
        expect(next.fence).toBeGreaterThan(lease.fence);
        await next.release();
      });

      it("takes a lapsed lease back on renew only while nobody else was granted it", async () => {
        const session = await newSession();
        const lapsed = await store.acquireLease(session.id, { ttlMs: 100 });
        await sleep(250);
        expect(await lapsed.renew(10_000)).toBe(true);
        await expectCode(store.acquireLease(session.id, { waitMs: 50 }), "session_busy");
        await lapsed.release();
        const stale = await store.acquireLease(session.id, { ttlMs: 100 });
        const fresh = await store.acquireLease(session.id, { waitMs: 5_000, ttlMs: 10_000 });
        expect(await stale.renew(10_000)).toBe(false);
        await expectCode(store.appendMessages(session.id, [text("late")], { fence: stale.fence }), "lease_expired");
        await fresh.release();
        expect(await fresh.renew(10_000)).toBe(false);
        const after = await store.acquireLease(session.id, { waitMs: 1000 });
        await after.release();
      });

      it("serialises whole turns so each turn's messages stay adjacent", async () => {
        const session = await newSession();
        await Promise.all(
          Array.from({ length: 20 }, async (_, i) => {
            const lease = await store.acquireLease(session.id, { waitMs: 20_000 });
            try {
              const history = await store.getMessages(session.id, { last: 1 });
              await sleep(1);
              await store.appendMessages(session.id, [text(`q${i}`)], { fence: lease.fence });
              await store.appendMessages(
                session.id,
                [{ role: "assistant", content: `a${i} after ${history.length}` }],
                { fence: lease.fence },
              );
            } finally {
              await lease.release();
            }
          }),
        );
        const all = await store.getMessages(session.id);
        expect(all.map((m) => m.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
        for (let i = 0; i < 40; i += 2) expect(String(all[i + 1].content)).toMatch(new RegExp(`^a${String(all[i].content).slice(1)} `));
      });

      it("holds across two store instances where the backend shares state", async (ctx) => {
        if (!store.capabilities.crossProcessLease) ctx.skip(`${target.name} leases are per process`);
        const second = await target.create();
        try {
          const session = await newSession();
          const order: string[] = [];
          const lease = await store.acquireLease(session.id);
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

    describeVectors(() => store, target.name);
    describeOwnerScope(() => store);
    describeTurns(() => store);
    describeSummaryBoundedCap(() => store);

    describeHistory(
      () => store,
      async () => {
        await store.close();
        store = await target.create();
        return store;
      },
    );

    describe("persistence", () => {
      it("keeps sessions, messages, summaries and state across close and reopen", async (ctx) => {
        if (!store.capabilities.persistent) ctx.skip(`${target.name} is not persistent`);
        const session = await newSession();
        await store.appendMessages(session.id, [text("remember me"), { role: "assistant", content: "I will." }]);
        await store.saveSummary(session.id, { fromSeq: 1, toSeq: 2, content: "greeting" });
        await store.setState(session.id, { entities: ["task:7"] }, 0);
        await store.close();
        store = await target.create();
        expect((await store.getSession(session.id))?.userId).toBe(session.userId);
        expect((await store.getMessages(session.id)).map((m) => [m.seq, m.content])).toEqual([
          [1, "remember me"],
          [2, "I will."],
        ]);
        expect((await store.listSummaries(session.id))[0].content).toBe("greeting");
        expect(await store.getState(session.id)).toEqual({ version: 1, data: { entities: ["task:7"] } });
        expect((await store.appendMessages(session.id, [text("more")]))[0].seq).toBe(3);
      });

      it("closes idempotently", async () => {
        const extra = await target.create();
        await extra.close();
        await extra.close();
      });
    });
  });
}
