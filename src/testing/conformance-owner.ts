/**
 * The owner-scoped part of the store conformance suite: `getMessages` and `appendMessages` with
 * `owner` check the owner and expiry themselves, and refuse another owner's, a missing and an
 * expired session with `session_not_found`, reading and writing nothing.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../core/ids.js";
import type { FullStore } from "../core/types.js";
import { expectCode, requireNative } from "./_conformance-fixtures.js";

/** Registers the owner-scope tests; `store()` gives the suite's open store. */
export function describeOwnerScope(store: () => FullStore): void {
  describe("owner-scoped calls", () => {
    const setup = async () => {
      const owner = `owner-${randomUUID()}`;
      const session = await store().createSession({ id: newSessionId(), userId: owner });
      await store().appendMessages(session.id, [
        { role: "user", content: "mine" },
        { role: "assistant", content: "yours" },
      ]);
      return { owner, id: session.id };
    };

    it("read and append for the owner in one call", async () => {
      const { owner, id } = await setup();
      expect((await store().getMessages(id, { last: 1, owner: { userId: owner } })).map((m) => m.content)).toEqual([
        "yours",
      ]);
      expect(
        (await store().getMessages(id, { fromSeq: 1, toSeq: 1, owner: { userId: owner } })).map((m) => m.content),
      ).toEqual(["mine"]);
      expect((await store().getMessages(id, { limit: 1, owner: { userId: owner } })).map((m) => m.content)).toEqual([
        "mine",
      ]);
      expect((await store().getMessages(id, { owner: { userId: owner } })).map((m) => m.content)).toEqual([
        "mine",
        "yours",
      ]);
      // Active exactly at the bound still counts as active.
      const { lastActivityAt } = (await store().getSession(id))!;
      expect(
        await store().getMessages(id, { last: 20, owner: { userId: owner, activeSince: lastActivityAt } }),
      ).toHaveLength(2);
      const [added] = await store().appendMessages(id, [{ role: "user", content: "more" }], {
        owner: { userId: owner, activeSince: Date.now() - 60_000 },
      });
      expect(added.seq).toBe(3);
      const empty = await store().createSession({ id: newSessionId(), userId: owner });
      expect(await store().getMessages(empty.id, { last: 20, owner: { userId: owner } })).toEqual([]);
    });

    it("refuse another owner's session with session_not_found, reading and writing nothing", async () => {
      const { id } = await setup();
      const stranger = { userId: `stranger-${randomUUID()}` };
      await expectCode(store().getMessages(id, { last: 20, owner: stranger }), "session_not_found");
      await expectCode(store().getMessages(id, { fromSeq: 1, owner: stranger }), "session_not_found");
      await expectCode(store().getMessages(id, { limit: 5, owner: stranger }), "session_not_found");
      await expectCode(store().getMessages(id, { owner: stranger }), "session_not_found");
      await expectCode(
        store().appendMessages(id, [{ role: "user", content: "intrusion" }], { owner: stranger }),
        "session_not_found",
      );
      await expectCode(
        store().appendMessages(id, [{ role: "user", content: "intrusion" }], { owner: stranger, operationId: "op-x" }),
        "session_not_found",
      );
      expect((await store().getMessages(id)).map((m) => m.content)).toEqual(["mine", "yours"]);
    });

    it("apply an idempotent append for the owner once, and refuse another owner's without recording its operation", async (ctx) => {
      requireNative(ctx, store(), "idempotentWrites");
      const { owner, id } = await setup();
      const stranger = { userId: `stranger-${randomUUID()}` };
      const late = { userId: owner, activeSince: Date.now() + 60_000 };
      const intrusion = [{ role: "user" as const, content: "intrusion" }];
      await expectCode(
        store().appendMessages(id, intrusion, { owner: stranger, operationId: "op-1" }),
        "session_not_found",
      );
      await expectCode(
        store().appendMessages(id, intrusion, { owner: late, operationId: "op-1" }),
        "session_not_found",
      );
      await expectCode(
        store().appendMessages(newSessionId(), intrusion, { owner: { userId: owner }, operationId: "op-1" }),
        "session_not_found",
      );
      expect(await store().countMessages(id)).toBe(2);
      // The refused attempts left no trace of op-1: the owner's own op-1, with other content, is new.
      const turn = [
        { role: "user" as const, content: "again" },
        { role: "assistant" as const, content: "once" },
      ];
      const first = await store().appendMessages(id, turn, { owner: { userId: owner }, operationId: "op-1" });
      expect(first.map((m) => m.seq)).toEqual([3, 4]);
      const retried = await store().appendMessages(id, turn, { owner: { userId: owner }, operationId: "op-1" });
      expect(retried.map((m) => [m.seq, m.content])).toEqual([
        [3, "again"],
        [4, "once"],
      ]);
      // Another owner cannot replay (or probe) the owner's operation either.
      await expectCode(store().appendMessages(id, turn, { owner: stranger, operationId: "op-1" }), "session_not_found");
      expect((await store().getMessages(id)).map((m) => m.content)).toEqual(["mine", "yours", "again", "once"]);
    });

    it("refuse a missing session and an expired one, and create nothing", async () => {
      const { owner, id } = await setup();
      const missing = newSessionId();
      await expectCode(store().getMessages(missing, { last: 20, owner: { userId: owner } }), "session_not_found");
      await expectCode(
        store().appendMessages(missing, [{ role: "user", content: "x" }], { owner: { userId: owner } }),
        "session_not_found",
      );
      expect(await store().getSession(missing)).toBeNull();
      const future = { userId: owner, activeSince: Date.now() + 60_000 };
      await expectCode(store().getMessages(id, { last: 20, owner: future }), "session_not_found");
      await expectCode(
        store().appendMessages(id, [{ role: "user", content: "late" }], { owner: future }),
        "session_not_found",
      );
      expect(await store().countMessages(id)).toBe(2);
    });
  });
}
