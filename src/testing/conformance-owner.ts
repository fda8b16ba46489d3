/**
 * The owner-scoped part of the store conformance suite: `getMessages` and `appendMessages` with
 * `owner` check the owner and expiry themselves, and refuse another owner's, a missing and an
 * expired session with `session_not_found`, reading and writing nothing.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../core/ids.js";
import type { SessionStore } from "../core/types.js";
import { expectCode } from "./conformance.js";

/** Registers the owner-scope tests; `store()` gives the suite's open store. */
export function describeOwnerScope(store: () => SessionStore): void {
  describe("owner-scoped calls", () => {
    const setup = async () => {
      const owner = `owner-${randomUUID()}`;
      const session = await store().createSession({ id: newSessionId(), userId: owner });
      await store().appendMessages(session.id, [{ role: "user", content: "mine" }, { role: "assistant", content: "yours" }]);
      return { owner, id: session.id };
    };

    it("read and append for the owner in one call", async (ctx) => {
      if (!store().capabilities.ownerScope) ctx.skip(`${store().name} does not scope calls by owner (Memory checks)`);
      const { owner, id } = await setup();
      expect((await store().getMessages(id, { last: 1, owner: { userId: owner } })).map((m) => m.content)).toEqual(["yours"]);
      expect((await store().getMessages(id, { fromSeq: 1, toSeq: 1, owner: { userId: owner } })).map((m) => m.content)).toEqual(["mine"]);
      const [added] = await store().appendMessages(id, [{ role: "user", content: "more" }], { owner: { userId: owner, activeSince: Date.now() - 60_000 } });
      expect(added.seq).toBe(3);
      const empty = await store().createSession({ id: newSessionId(), userId: owner });
      expect(await store().getMessages(empty.id, { last: 20, owner: { userId: owner } })).toEqual([]);
    });

    it("refuse another owner's session with session_not_found, reading and writing nothing", async (ctx) => {
      if (!store().capabilities.ownerScope) ctx.skip(`${store().name} does not scope calls by owner (Memory checks)`);
      const { id } = await setup();
      const stranger = { userId: `stranger-${randomUUID()}` };
      await expectCode(store().getMessages(id, { last: 20, owner: stranger }), "session_not_found");
      await expectCode(store().getMessages(id, { fromSeq: 1, owner: stranger }), "session_not_found");
      await expectCode(store().appendMessages(id, [{ role: "user", content: "intrusion" }], { owner: stranger }), "session_not_found");
      await expectCode(
        store().appendMessages(id, [{ role: "user", content: "intrusion" }], { owner: stranger, operationId: "op-x" }),
        "session_not_found",
      );
      expect((await store().getMessages(id)).map((m) => m.content)).toEqual(["mine", "yours"]);
    });

    it("refuse a missing session and an expired one, and create nothing", async (ctx) => {
      if (!store().capabilities.ownerScope) ctx.skip(`${store().name} does not scope calls by owner (Memory checks)`);
      const { owner, id } = await setup();
      const missing = newSessionId();
      await expectCode(store().getMessages(missing, { last: 20, owner: { userId: owner } }), "session_not_found");
      await expectCode(store().appendMessages(missing, [{ role: "user", content: "x" }], { owner: { userId: owner } }), "session_not_found");
      expect(await store().getSession(missing)).toBeNull();
      const future = { userId: owner, activeSince: Date.now() + 60_000 };
      await expectCode(store().getMessages(id, { last: 20, owner: future }), "session_not_found");
      await expectCode(store().appendMessages(id, [{ role: "user", content: "late" }], { owner: future }), "session_not_found");
      expect(await store().countMessages(id)).toBe(2);
    });
  });
}
