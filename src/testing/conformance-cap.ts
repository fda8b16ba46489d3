/**
 * The summary-bounded cap of the store conformance suite (stores with summaries): a write
 * with `maxMessages` and `keepUnsummarized` drops the oldest messages beyond the cap, but none past the
 * furthest seq the session's stored summaries reach, whatever the caller believes of the session;
 * and its ceiling (`hardCap`), past which the oldest go whatever the summaries reach, on every store
 * (one without summaries gets it from `completeStore` as a plain cap).
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it, type TestContext } from "vitest";
import { newSessionId } from "../core/ids.js";
import type { MessageInput, FullStore } from "../core/types.js";
import { requireNative } from "./_conformance-fixtures.js";

const text = (content: string): MessageInput => ({ role: "user", content });
const texts = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => text(`m${from + i}`));

/** Registers the bounded-cap tests; `store()` gives the suite's open store. */
export function describeSummaryBoundedCap(store: () => FullStore): void {
  describe("cap bounded by summaries", () => {
    const supported = (ctx: TestContext) => {
      requireNative(ctx, store(), "summaries");
    };
    /** A session holding m1..m`count`, summarised up to each of `reach` in turn. */
    const setup = async (count: number, ...reach: number[]) => {
      const session = await store().createSession({ id: newSessionId(), userId: `user-${randomUUID()}` });
      if (count > 0) await store().appendMessages(session.id, texts(1, count));
      for (const toSeq of reach) await store().saveSummary(session.id, { fromSeq: 1, toSeq, content: `1..${toSeq}` });
      return session.id;
    };
    const seqs = async (id: string) => (await store().getMessages(id)).map((m) => m.seq);
    const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
    const bounded = (maxMessages: number) => ({ maxMessages, keepUnsummarized: true });

    it("drops the oldest beyond the cap, but none a summary does not cover", async (ctx) => {
      supported(ctx);
      const id = await setup(10, 4);
      const added = await store().appendMessages(id, texts(11, 12), bounded(5));
      expect(added.map((m) => m.seq)).toEqual([11, 12]);
      expect(await seqs(id)).toEqual(range(5, 12));
      await store().saveSummary(id, { fromSeq: 1, toSeq: 9, content: "1..9" });
      // An empty append applies the cap alone; the summary now covers more than the cap drops.
      expect(await store().appendMessages(id, [], bounded(5))).toEqual([]);
      expect(await seqs(id)).toEqual(range(8, 12));
      await store().appendMessages(id, texts(13, 13), { ...bounded(5), operationId: `op-${randomUUID()}` });
      expect(await seqs(id)).toEqual(range(9, 13));
      // Capped seqs are never given again.
      expect((await store().appendMessages(id, texts(14, 14)))[0].seq).toBe(14);
    });

    it("drops nothing from a session without summaries, new messages included", async (ctx) => {
      supported(ctx);
      const id = await setup(0);
      await store().appendMessages(id, texts(1, 8), bounded(3));
      expect(await store().appendMessages(id, [], bounded(3))).toEqual([]);
      expect(await seqs(id)).toEqual(range(1, 8));
      expect(await store().countMessages(id)).toBe(8);
    });

    it("counts the furthest summary, whichever was saved last, and never drops more than the cap asks", async (ctx) => {
      supported(ctx);
      const id = await setup(10, 6, 3);
      await store().appendMessages(id, [], bounded(2));
      expect(await seqs(id)).toEqual(range(7, 10));
      const beyond = await setup(10, 20);
      await store().appendMessages(beyond, [], bounded(3));
      expect(await seqs(beyond)).toEqual(range(8, 10));
    });

    it("bounds the cap of a tail replacement the same way", async (ctx) => {
      supported(ctx);
      const id = await setup(10, 6);
      const added = await store().replaceAfter(id, 8, texts(21, 23), bounded(4));
      expect(added.map((m) => m.seq)).toEqual([9, 10, 11]);
      expect(await seqs(id)).toEqual(range(7, 11));
      expect((await store().getMessages(id)).map((m) => m.content)).toEqual(["m7", "m8", "m21", "m22", "m23"]);
    });

    it("drops the oldest past the ceiling (hardCap) on every store, summarised or not", async () => {
      const id = await setup(0);
      const ceiling = (maxMessages: number, hardCap: number) => ({ ...bounded(maxMessages), hardCap });
      await store().appendMessages(id, texts(1, 8), ceiling(3, 6));
      expect(await seqs(id)).toEqual(range(3, 8));
      await store().appendMessages(id, texts(9, 10), ceiling(3, 6));
      expect(await seqs(id)).toEqual(range(5, 10));
      // Under the ceiling nothing unsummarised goes.
      await store().appendMessages(id, texts(11, 11), ceiling(3, 20));
      expect(await seqs(id)).toEqual(range(5, 11));
      const replaced = await store().replaceAfter(id, 10, texts(21, 23), ceiling(3, 5));
      expect(replaced.map((m) => m.seq)).toEqual([11, 12, 13]);
      expect(await seqs(id)).toEqual(range(9, 13));
      expect(await store().countMessages(id)).toBe(5);
    });

    it("applies the ceiling after the summary-bounded cap: whichever drops more wins", async (ctx) => {
      supported(ctx);
      const id = await setup(10, 6);
      await store().appendMessages(id, texts(11, 12), { ...bounded(3), hardCap: 8 });
      // The summaries let the cap drop 1..6; the ceiling alone would drop 1..4.
      expect(await seqs(id)).toEqual(range(7, 12));
      await store().appendMessages(id, texts(13, 16), { ...bounded(3), hardCap: 8 });
      // 7..16 is ten: the ceiling drops 7 and 8 though no summary covers them.
      expect(await seqs(id)).toEqual(range(9, 16));
      expect((await store().appendMessages(id, texts(17, 17)))[0].seq).toBe(17);
    });

    it("does not count the summaries of a deleted session for the one created again under its id", async (ctx) => {
      supported(ctx);
      const id = await setup(10, 8);
      const userId = (await store().getSession(id))!.userId;
      expect(await store().deleteSession(id)).toBe(true);
      await store().createSession({ id, userId });
      await store().appendMessages(id, texts(1, 12), bounded(3));
      await store().appendMessages(id, [], bounded(3));
      expect(await seqs(id)).toEqual(range(1, 12));
    });
  });
}
