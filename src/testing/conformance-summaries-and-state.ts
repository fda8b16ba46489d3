/**
 * Summaries and conversational state in the store conformance suite: summaries listed in seq order
 * (and saved only into the session incarnation they name),
 * state written by compare-and-set on its version.
 */
import { describe, expect, it } from "vitest";
import type { FullStore } from "../core/types.js";
import { expectCode, requireNative, sessionMaker } from "./_conformance-fixtures.js";

/** Registers the summaries and state tests; `store()` gives the suite's open store. */
export function describeSummariesAndState(store: () => FullStore): void {
  const newSession = sessionMaker(store);

  describe("summaries and state", () => {
    it("saves and lists summaries in seq order", async (ctx) => {
      requireNative(ctx, store(), "summaries");
      const session = await newSession();
      const later = await store().saveSummary(session.id, { fromSeq: 11, toSeq: 20, content: "second part" });
      const first = await store().saveSummary(session.id, {
        fromSeq: 1,
        toSeq: 10,
        content: "first part",
        metadata: { model: "m" },
      });
      expect(first.id).not.toBe(later.id);
      const list = await store().listSummaries(session.id);
      expect(list.map((s) => [s.fromSeq, s.toSeq, s.content])).toEqual([
        [1, 10, "first part"],
        [11, 20, "second part"],
      ]);
      expect(list[0].metadata).toEqual({ model: "m" });
    });

    it("refuses a summary made from a session deleted and created again under its id", async (ctx) => {
      requireNative(ctx, store(), "summaries");
      const old = await newSession();
      const kept = await store().saveSummary(old.id, {
        fromSeq: 1,
        toSeq: 2,
        content: "same session",
        sessionCreatedAt: old.createdAt,
      });
      expect(kept.content).toBe("same session");
      expect(kept).not.toHaveProperty("sessionCreatedAt");
      await store().deleteSession(old.id);
      await expectCode(
        store().saveSummary(old.id, { fromSeq: 1, toSeq: 5, content: "gone", sessionCreatedAt: old.createdAt }),
        "session_not_found",
      );
      const again = await store().createSession({ id: old.id, userId: old.userId, createdAt: old.createdAt + 1 });
      await store().appendMessages(again.id, [{ role: "user", content: "new" }]);
      await expectCode(
        store().saveSummary(again.id, { fromSeq: 1, toSeq: 5, content: "old text", sessionCreatedAt: old.createdAt }),
        "session_not_found",
      );
      expect(await store().listSummaries(again.id)).toEqual([]);
      const saved = await store().saveSummary(again.id, {
        fromSeq: 1,
        toSeq: 1,
        content: "new text",
        sessionCreatedAt: again.createdAt,
      });
      expect((await store().listSummaries(again.id)).map((s) => [s.id, s.content])).toEqual([[saved.id, "new text"]]);
    });

    it("compares and sets state by version", async (ctx) => {
      requireNative(ctx, store(), "state");
      const session = await newSession();
      expect(await store().getState(session.id)).toEqual({ version: 0, data: {} });
      const v1 = await store().setState(session.id, { intent: "create_task", entities: ["task:42"] }, 0);
      expect(v1).toEqual({ version: 1, data: { intent: "create_task", entities: ["task:42"] } });
      await expectCode(store().setState(session.id, { intent: "lost" }, 0), "state_conflict");
      expect((await store().getState(session.id)).data.intent).toBe("create_task");
    });

    it("lets exactly one of many concurrent compare-and-sets win", async (ctx) => {
      requireNative(ctx, store(), "state");
      const session = await newSession();
      await store().setState(session.id, { n: 0 }, 0);
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) => store().setState(session.id, { n: i + 1 }, 1)),
      );
      const won = results.filter((r) => r.status === "fulfilled");
      expect(won).toHaveLength(1);
      for (const r of results) if (r.status === "rejected") expect(r.reason.code).toBe("state_conflict");
      expect((await store().getState(session.id)).version).toBe(2);
    });
  });
}
