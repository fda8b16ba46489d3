/**
 * The history part of the store conformance suite (run by `describeStore`): idempotent writes,
 * atomic tail replacement and branches, with the same assertions on every backend.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../core/ids.js";
import type { MessageInput, FullStore } from "../core/types.js";
import { expectCode, requireNative } from "./_conformance-fixtures.js";

const text = (content: string, role: "user" | "assistant" = "user"): MessageInput => ({ role, content });
const contents = (messages: { content: unknown }[]) => messages.map((m) => m.content);

/** Registers the history tests; `store()` gives the suite's open store, `reopen()` closes and reopens it. */
export function describeHistory(store: () => FullStore, reopen: () => Promise<FullStore>): void {
  const newSession = async (...messages: string[]) => {
    const session = await store().createSession({ id: newSessionId(), userId: `user-${randomUUID()}` });
    if (messages.length > 0)
      await store().appendMessages(
        session.id,
        messages.map((m, i) => text(m, i % 2 ? "assistant" : "user")),
      );
    return session.id;
  };

  describe("idempotent writes", () => {
    it("applies an append with an operation id once and returns what it stored", async (ctx) => {
      requireNative(ctx, store(), "idempotentWrites");
      const id = await newSession("hello");
      const first = await store().appendMessages(id, [text("a"), text("b")], { operationId: "op-1" });
      const again = await store().appendMessages(id, [text("a"), text("b")], { operationId: "op-1" });
      expect(again).toEqual(first);
      expect(contents(await store().getMessages(id))).toEqual(["hello", "a", "b"]);
      await expectCode(store().appendMessages(id, [text("other")], { operationId: "op-1" }), "operation_conflict");
      expect(await store().countMessages(id)).toBe(3);
      // Operation ids are per session.
      const other = await newSession();
      expect((await store().appendMessages(other, [text("a"), text("b")], { operationId: "op-1" }))[0].seq).toBe(1);
    });

    it("stores once when the same operation arrives many times at once", async (ctx) => {
      requireNative(ctx, store(), "idempotentWrites");
      const id = await newSession();
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, () =>
          store().appendMessages(id, [text("once"), text("twice")], { operationId: "retry" }),
        ),
      );
      expect(results.every((r) => r.status === "fulfilled")).toBe(true);
      expect(contents(await store().getMessages(id))).toEqual(["once", "twice"]);
    });

    it("answers a replay whatever its fence, and still refuses a new write with a stale one", async (ctx) => {
      requireNative(ctx, store(), "idempotentWrites");
      const id = await newSession("hello");
      const first = await store().acquireLease(id, { ttlMs: 10_000 });
      const stored = await store().appendMessages(id, [text("a")], { fence: first.fence, operationId: "op-1" });
      await first.release();
      const second = await store().acquireLease(id, { ttlMs: 10_000 });
      try {
        // The first holder retries a commit whose answer it lost: it applied, so it is not refused.
        expect(await store().appendMessages(id, [text("a")], { fence: first.fence, operationId: "op-1" })).toEqual(
          stored,
        );
        await expectCode(
          store().appendMessages(id, [text("a")], { fence: first.fence, operationId: "op-2" }),
          "lease_expired",
        );
        await expectCode(
          store().appendMessages(id, [text("b")], { fence: first.fence, operationId: "op-1" }),
          "operation_conflict",
        );
        const replaced = await store().replaceAfter(id, 1, [text("b")], { fence: second.fence, operationId: "op-3" });
        await second.release();
        await (await store().acquireLease(id, { ttlMs: 10_000 })).release();
        expect(await store().replaceAfter(id, 1, [text("b")], { fence: second.fence, operationId: "op-3" })).toEqual(
          replaced,
        );
        expect(contents(await store().getMessages(id))).toEqual(["hello", "b"]);
      } finally {
        await second.release();
      }
    });

    it("forgets operation ids with their session", async () => {
      const id = await newSession();
      await store().appendMessages(id, [text("x")], { operationId: "op" });
      const session = (await store().getSession(id))!;
      await store().deleteSession(id);
      await store().createSession({ id, userId: session.userId });
      await store().appendMessages(id, [text("x")], { operationId: "op" });
      expect(await store().countMessages(id)).toBe(1);
      expect(await store().listBranches(id)).toEqual([]);
    });
  });

  describe("replaceAfter", () => {
    it("truncates and appends in one step, seqs following the kept part", async () => {
      const id = await newSession("q1", "a1", "q2", "a2");
      const added = await store().replaceAfter(id, 2, [text("q2 edited"), text("a2 new", "assistant")]);
      expect(added.map((m) => m.seq)).toEqual([3, 4]);
      const stored = await store().getMessages(id);
      expect(contents(stored)).toEqual(["q1", "a1", "q2 edited", "a2 new"]);
      expect(stored.map((m) => m.seq)).toEqual([1, 2, 3, 4]);
      await store().replaceAfter(id, 0, [text("fresh")]);
      expect(contents(await store().getMessages(id))).toEqual(["fresh"]);
      await store().replaceAfter(id, 1, [text("appended")]);
      expect(contents(await store().getMessages(id))).toEqual(["fresh", "appended"]);
      await expectCode(store().replaceAfter(newSessionId(), 0, [text("x")]), "session_not_found");
    });

    it("changes nothing when the seq, the expected last seq or a message is wrong", async () => {
      const id = await newSession("q1", "a1");
      await expectCode(store().replaceAfter(id, 3, [text("x")]), "history_conflict");
      await expectCode(store().replaceAfter(id, 1, [text("x")], { expectedLastSeq: 1 }), "history_conflict");
      await expectCode(
        store().replaceAfter(id, 1, [text("ok"), { role: "nobody", content: "x" } as never]),
        "invalid_message",
      );
      await expectCode(store().replaceAfter(id, -1, [text("x")]), "invalid_request");
      expect(contents(await store().getMessages(id))).toEqual(["q1", "a1"]);
      await store().replaceAfter(id, 1, [text("a1 again", "assistant")], { expectedLastSeq: 2 });
      expect(contents(await store().getMessages(id))).toEqual(["q1", "a1 again"]);
    });

    it("refuses to reuse seqs the cap dropped, and caps in the same step", async () => {
      const id = await newSession("1", "2", "3", "4", "5");
      await store().appendMessages(id, [text("6")], { maxMessages: 3 });
      expect((await store().getMessages(id)).map((m) => m.seq)).toEqual([4, 5, 6]);
      await expectCode(store().replaceAfter(id, 2, [text("x")]), "history_conflict");
      await store().replaceAfter(id, 3, [text("a"), text("b"), text("c"), text("d")], { maxMessages: 3 });
      const stored = await store().getMessages(id);
      expect(stored.map((m) => m.seq)).toEqual([5, 6, 7]);
      expect(contents(stored)).toEqual(["b", "c", "d"]);
    });

    it("is idempotent with an operation id", async (ctx) => {
      requireNative(ctx, store(), "idempotentWrites");
      const id = await newSession("q1", "a1");
      const first = await store().replaceAfter(id, 1, [text("a1 regenerated", "assistant")], {
        operationId: "r1",
        expectedLastSeq: 2,
      });
      const again = await store().replaceAfter(id, 1, [text("a1 regenerated", "assistant")], {
        operationId: "r1",
        expectedLastSeq: 2,
      });
      expect(again).toEqual(first);
      await expectCode(
        store().replaceAfter(id, 0, [text("a1 regenerated", "assistant")], { operationId: "r1" }),
        "operation_conflict",
      );
      expect(contents(await store().getMessages(id))).toEqual(["q1", "a1 regenerated"]);
    });

    it("stays all-or-nothing under concurrent appends", async () => {
      const id = await newSession("keep 1", "keep 2", "old 3", "old 4");
      const appends = Array.from({ length: 20 }, (_, i) => store().appendMessages(id, [text(`append ${i}`)]));
      const replaced = store().replaceAfter(id, 2, [text("new 3"), text("new 4"), text("new 5")]);
      await Promise.all([...appends, replaced]);
      const stored = await store().getMessages(id);
      expect(stored.map((m) => m.seq)).toEqual(stored.map((_, i) => i + 1));
      const texts = contents(stored) as string[];
      expect(texts.slice(0, 5)).toEqual(["keep 1", "keep 2", "new 3", "new 4", "new 5"]);
      expect(texts.filter((t) => t.startsWith("old"))).toEqual([]);
      expect(texts.slice(5).every((t) => t.startsWith("append"))).toBe(true);
      expect((await replaced).map((m) => m.seq)).toEqual([3, 4, 5]);
    });

    it("fences out a stale lease holder", async () => {
      const id = await newSession("q1");
      const first = await store().acquireLease(id, { ttlMs: 100 });
      await new Promise((resolve) => setTimeout(resolve, 150));
      const second = await store().acquireLease(id, { waitMs: 2000 });
      await expectCode(store().replaceAfter(id, 0, [text("stale")], { fence: first.fence }), "lease_expired");
      await store().replaceAfter(id, 0, [text("current")], { fence: second.fence });
      await second.release();
      expect(contents(await store().getMessages(id))).toEqual(["current"]);
    });
  });

  describe("branches", () => {
    it("keeps a replaced tail as a branch and switches back and forth", async (ctx) => {
      requireNative(ctx, store(), "branches");
      const id = await newSession("Suggest a cat name.", "Whiskers");
      await store().replaceAfter(id, 1, [text("Luna", "assistant")], { branch: { reason: "regenerate" } });
      await store().replaceAfter(id, 1, [text("Mochi", "assistant")], {
        branch: { reason: "regenerate", metadata: { by: "test" } },
      });
      expect(contents(await store().getMessages(id))).toEqual(["Suggest a cat name.", "Mochi"]);
      const branches = await store().listBranches(id);
      expect(branches.map((b) => [b.id, b.atSeq, b.parentId, b.reason, contents(b.messages)])).toEqual([
        [1, 1, null, "regenerate", ["Whiskers"]],
        [2, 1, null, "regenerate", ["Luna"]],
      ]);
      expect(branches[1].metadata).toEqual({ by: "test" });
      expect(branches[0].messages[0].seq).toBe(2);

      const switched = await store().switchBranch(id, 1);
      expect(contents(switched.messages)).toEqual(["Mochi"]);
      expect(switched.reason).toBe("regenerate");
      const main = await store().getMessages(id);
      expect(contents(main)).toEqual(["Suggest a cat name.", "Whiskers"]);
      expect(main[1].createdAt).toBe(branches[0].messages[0].createdAt);
      await store().switchBranch(id, 1);
      expect(contents(await store().getMessages(id))).toEqual(["Suggest a cat name.", "Mochi"]);
      // The main line goes on after a switch.
      expect((await store().appendMessages(id, [text("Thanks")]))[0].seq).toBe(3);
    });

    it("moves branches with the messages they split from", async (ctx) => {
      requireNative(ctx, store(), "branches");
      const id = await newSession("q1", "a1", "q2", "a2");
      await store().replaceAfter(id, 3, [text("a2 regenerated", "assistant")], { branch: { reason: "regenerate" } });
      await store().replaceAfter(id, 0, [text("q1 edited"), text("a1 edited", "assistant")], {
        branch: { reason: "edit" },
      });
      const [firstListed, edited] = await store().listBranches(id);
      let regenerated = firstListed;
      expect(regenerated.parentId).toBe(edited.id);
      expect(contents(edited.messages)).toEqual(["q1", "a1", "q2", "a2 regenerated"]);
      await expectCode(store().switchBranch(id, regenerated.id), "history_conflict");
      await store().switchBranch(id, edited.id);
      expect(contents(await store().getMessages(id))).toEqual(["q1", "a1", "q2", "a2 regenerated"]);
      [regenerated] = await store().listBranches(id);
      expect(regenerated.parentId).toBeNull();
      await store().switchBranch(id, regenerated.id);
      expect(contents(await store().getMessages(id))).toEqual(["q1", "a1", "q2", "a2"]);
      await expectCode(store().switchBranch(id, 99), "not_found");
    });

    it("makes no branch when nothing is replaced, and refuses a branch whose point is gone", async (ctx) => {
      requireNative(ctx, store(), "branches");
      const id = await newSession("q1", "a1", "q2", "a2");
      await store().replaceAfter(id, 4, [text("q3")], { branch: { reason: "fork" } });
      expect(await store().listBranches(id)).toEqual([]);
      await store().replaceAfter(id, 3, [text("a2'", "assistant")], { branch: { reason: "regenerate" } });
      await store().truncateAfter(id, 1);
      await expectCode(store().switchBranch(id, 1), "history_conflict");
      expect(contents(await store().getMessages(id))).toEqual(["q1"]);
      await expectCode(
        store().replaceAfter(id, 0, [text("x")], { branch: { reason: "nope" as never } }),
        "invalid_request",
      );
    });

    it("stores whole branch records for imports, keeping their ids", async (ctx) => {
      requireNative(ctx, store(), "branches");
      const id = await newSession("q1", "a1");
      const record = {
        id: 7,
        atSeq: 1,
        parentId: null,
        reason: "edit" as const,
        createdAt: 1_000,
        metadata: { from: "import" },
        messages: [{ role: "assistant" as const, content: "old", seq: 2, createdAt: 900 }],
      };
      expect(await store().saveBranch(id, record)).toEqual(record);
      expect(await store().listBranches(id)).toEqual([record]);
      await store().switchBranch(id, 7);
      expect(contents(await store().getMessages(id))).toEqual(["q1", "old"]);
    });

    it("keeps branches and operation ids across close and reopen", async (ctx) => {
      if (!store().capabilities.persistent) ctx.skip(`${store().name} is not persistent`);
      const id = await newSession("q1", "a1");
      await store().replaceAfter(id, 1, [text("a1'", "assistant")], {
        branch: { reason: "regenerate" },
        operationId: "op",
      });
      const second = await reopen();
      expect(contents((await second.listBranches(id))[0].messages)).toEqual(["a1"]);
      await second.replaceAfter(id, 1, [text("a1'", "assistant")], { operationId: "op" });
      expect(contents(await second.getMessages(id))).toEqual(["q1", "a1'"]);
    });
  });
}
