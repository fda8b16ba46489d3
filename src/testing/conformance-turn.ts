/**
 * The turn part of the store conformance suite: `openTurn` (the store's own, or the call-by-call one
 * of `core/open-turn.ts`) holds the lease and reads what the turn needs as of the grant, and on stores
 * with `capabilities.combinedTurn` a write with `releaseLease` gives the lease back in the same step.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../core/ids.js";
import { openTurn } from "../core/store/complete.js";
import type { FullStore } from "../core/types.js";
import { expectCode, implementsNatively, requireNative } from "./_conformance-fixtures.js";

const say = (content: string) => ({ role: "user" as const, content });

/** Registers the turn tests; `store()` gives the suite's open store. */
export function describeTurns(store: () => FullStore): void {
  describe("turns", () => {
    const setup = async (messages = 5) => {
      const owner = `owner-${randomUUID()}`;
      const session = await store().createSession({ id: newSessionId(), userId: owner });
      await store().appendMessages(
        session.id,
        Array.from({ length: messages }, (_, i) => say(`m${i + 1}`)),
      );
      return { owner, id: session.id };
    };
    const opening = (userId: string, last = 3) => ({
      owner: { userId },
      last,
      lease: { ttlMs: 10_000, waitMs: 5_000 },
    });

    it("openTurn holds the lease and reads the session, its newest messages, summaries and state", async () => {
      const { owner, id } = await setup();
      // A store without summaries or state opens turns with none (completeStore's fallbacks).
      const summaries = implementsNatively(store(), "summaries");
      const state = implementsNatively(store(), "state");
      if (summaries) await store().saveSummary(id, { fromSeq: 1, toSeq: 2, content: "the start" });
      if (state) await store().setState(id, { topic: "tea" }, 0);
      const opened = await openTurn(store(), id, opening(owner));
      try {
        expect(opened.status).toBe("ok");
        expect(opened.session).toMatchObject({ id, userId: owner });
        expect(opened.messages.map((m) => [m.seq, m.content])).toEqual([
          [3, "m3"],
          [4, "m4"],
          [5, "m5"],
        ]);
        expect(opened.summaries.map((s) => [s.fromSeq, s.toSeq, s.content])).toEqual(
          summaries ? [[1, 2, "the start"]] : [],
        );
        expect(opened.state).toEqual(state ? { version: 1, data: { topic: "tea" } } : { version: 0, data: {} });
        await expectCode(store().acquireLease(id, { waitMs: 50 }), "session_busy");
        const [added] = await store().appendMessages(id, [say("m6")], { fence: opened.lease.fence });
        expect(added.seq).toBe(6);
      } finally {
        await opened.lease.release();
      }
      await (await store().acquireLease(id, { waitMs: 1_000 })).release();
      const all = await openTurn(store(), id, opening(owner, 100));
      await all.lease.release();
      expect(all.messages.map((m) => m.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    });

    it("openTurn reads exactly what the separate reads return, whatever the text holds", async () => {
      const owner = `owner-${randomUUID()}`;
      const tricky = 'quotes " \' back\\slash \n new line \t tab, 🦜 é 中文, </script>, ] } , "}';
      const session = await store().createSession({
        id: newSessionId(),
        userId: owner,
        metadata: { title: tricky, n: [1, { x: null }] },
      });
      const id = session.id;
      await store().appendMessages(id, [
        say(tricky),
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: '{"a":"\\"}' } }],
        },
        { role: "tool", tool_call_id: "c1", content: [{ type: "text", text: tricky }] },
      ] as never);
      if (implementsNatively(store(), "summaries")) {
        await store().saveSummary(id, { fromSeq: 1, toSeq: 1, content: tricky, metadata: { by: tricky } });
        await store().saveSummary(id, { fromSeq: 2, toSeq: 2, content: "plain" });
      }
      if (implementsNatively(store(), "state")) await store().setState(id, { tricky, nested: { list: [tricky] } }, 0);
      const opened = await openTurn(store(), id, opening(owner, 20));
      try {
        expect(opened.session).toEqual(await store().getSession(id));
        expect(opened.messages).toEqual(await store().getMessages(id));
        expect(opened.summaries).toEqual(await store().listSummaries(id));
        expect(opened.state).toEqual(await store().getState(id));
      } finally {
        await opened.lease.release();
      }
    });

    it("openTurn reports a missing, another owner's and an expired session, returning nothing of them", async () => {
      const { owner, id } = await setup();
      if (implementsNatively(store(), "state")) await store().setState(id, { secret: true }, 0);
      const missing = newSessionId();
      const none = await openTurn(store(), missing, opening(owner));
      expect(none).toMatchObject({ status: "missing", session: null, messages: [], summaries: [] });
      // The lease of a session about to be created is held all the same.
      await expectCode(store().acquireLease(missing, { waitMs: 50 }), "session_busy");
      await none.lease.release();
      expect(await store().getSession(missing)).toBeNull();

      const foreign = await openTurn(store(), id, opening(`stranger-${randomUUID()}`));
      await foreign.lease.release();
      expect(foreign).toMatchObject({
        status: "foreign",
        session: null,
        messages: [],
        summaries: [],
        state: { version: 0, data: {} },
      });

      const late = await openTurn(store(), id, {
        ...opening(owner),
        owner: { userId: owner, activeSince: Date.now() + 60_000 },
      });
      await late.lease.release();
      expect(late).toMatchObject({ status: "expired", session: null, messages: [] });
      expect(await store().countMessages(id)).toBe(5);
    });

    it("openTurn waits in line and reads what the turns before it stored", async () => {
      const { owner, id } = await setup(1);
      const held = await store().acquireLease(id, { ttlMs: 10_000 });
      const order: string[] = [];
      const first = openTurn(store(), id, opening(owner, 10)).then((t) => (order.push("first"), t));
      await new Promise((resolve) => setTimeout(resolve, 50));
      const second = openTurn(store(), id, opening(owner, 10)).then((t) => (order.push("second"), t));
      await new Promise((resolve) => setTimeout(resolve, 50));
      await store().appendMessages(id, [say("from the holder")], { fence: held.fence });
      await held.release();
      const a = await first;
      expect(a.messages.map((m) => m.content)).toEqual(["m1", "from the holder"]);
      await store().appendMessages(id, [say("from the first")], { fence: a.lease.fence });
      await a.lease.release();
      const b = await second;
      await b.lease.release();
      expect(order).toEqual(["first", "second"]);
      expect(b.messages.map((m) => m.content)).toEqual(["m1", "from the holder", "from the first"]);
    });

    it("a write with releaseLease gives the lease back in the same step, and only when it applies", async () => {
      const { owner, id } = await setup(2);
      const refused = await openTurn(store(), id, opening(owner));
      await expectCode(
        store().replaceAfter(id, 1, [say("edit")], {
          fence: refused.lease.fence,
          expectedLastSeq: 1,
          releaseLease: true,
        }),
        "history_conflict",
      );
      await expectCode(store().acquireLease(id, { waitMs: 50 }), "session_busy");
      await refused.lease.release();

      const turn = await openTurn(store(), id, opening(owner));
      await store().appendMessages(id, [say("q"), { role: "assistant", content: "a" }], {
        fence: turn.lease.fence,
        releaseLease: true,
      });
      const next = await store().acquireLease(id, { waitMs: 200, ttlMs: 10_000 });
      // The first holder's own release, after the commit released it, must not free the next one.
      await turn.lease.release();
      expect(await turn.lease.renew(10_000)).toBe(false);
      await expectCode(store().acquireLease(id, { waitMs: 50 }), "session_busy");
      await store().replaceAfter(id, 3, [{ role: "assistant", content: "again" }], {
        fence: next.fence,
        releaseLease: true,
      });
      await (await store().acquireLease(id, { waitMs: 200 })).release();
      await next.release();
      expect((await store().getMessages(id)).map((m) => m.content)).toEqual(["m1", "m2", "q", "again"]);
    });

    it("a replayed write with releaseLease gives back the caller's lease, never another holder's", async (ctx) => {
      requireNative(ctx, store(), "idempotentWrites");
      const { owner, id } = await setup(1);
      const turn = [say("q"), { role: "assistant" as const, content: "a" }];
      const first = await openTurn(store(), id, opening(owner));
      const stored = await store().appendMessages(id, turn, {
        fence: first.lease.fence,
        operationId: "commit",
        releaseLease: true,
      });

      // A retried commit (its first answer lost) under a new lease: nothing changes, and the turn is
      // over all the same, so the lease is given back as an applied write would.
      const retry = await openTurn(store(), id, opening(owner));
      expect(
        await store().appendMessages(id, turn, { fence: retry.lease.fence, operationId: "commit", releaseLease: true }),
      ).toEqual(stored);
      const next = await store().acquireLease(id, { waitMs: 200, ttlMs: 10_000 });
      await retry.lease.release();
      expect(await retry.lease.renew(10_000)).toBe(false);
      await expectCode(store().acquireLease(id, { waitMs: 50 }), "session_busy");

      // The same retry with a fence since taken over: an applied operation is still answered with
      // what it stored, but the lease now held by someone else stays theirs.
      expect(
        await store().appendMessages(id, turn, { fence: first.lease.fence, operationId: "commit", releaseLease: true }),
      ).toEqual(stored);
      await expectCode(store().acquireLease(id, { waitMs: 50 }), "session_busy");
      expect(await next.renew(10_000)).toBe(true);

      // A replacement replayed, and a replay that conflicts (the write fails, so the lease stays held).
      const edited = await store().replaceAfter(id, 2, [{ role: "assistant", content: "b" }], {
        fence: next.fence,
        operationId: "edit",
        releaseLease: true,
      });
      const again = await openTurn(store(), id, opening(owner));
      await expectCode(
        store().replaceAfter(id, 2, [{ role: "assistant", content: "c" }], {
          fence: again.lease.fence,
          operationId: "edit",
          releaseLease: true,
        }),
        "operation_conflict",
      );
      await expectCode(store().acquireLease(id, { waitMs: 50 }), "session_busy");
      expect(
        await store().replaceAfter(id, 2, [{ role: "assistant", content: "b" }], {
          fence: again.lease.fence,
          operationId: "edit",
          releaseLease: true,
        }),
      ).toEqual(edited);
      await (await store().acquireLease(id, { waitMs: 200 })).release();
      await again.lease.release();
      await next.release();
      expect((await store().getMessages(id)).map((m) => m.content)).toEqual(["m1", "q", "b"]);
    });
  });
}
