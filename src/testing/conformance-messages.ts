/**
 * Messages in the store conformance suite: contiguous seq, lossless round trips, reads by range,
 * whole-batch validation, concurrent appends, pop and truncate, (with `capabilities.guardedAppends`)
 * writes only into the session incarnation they name, unicode and large messages.
 */
import { describe, expect, it } from "vitest";
import type { MessageInput, FullStore } from "../core/types.js";
import { expectCode, sessionMaker, text } from "./_conformance-fixtures.js";

/** Registers the messages tests; `store()` gives the suite's open store. */
export function describeMessages(store: () => FullStore): void {
  const newSession = sessionMaker(store);

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
      const stored = await store().appendMessages(session.id, inputs);
      expect(stored.map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);
      const read = await store().getMessages(session.id);
      expect(read).toEqual(stored);
      read.forEach((m, i) => {
        const { seq, createdAt, ...rest } = m;
        expect(rest).toEqual(inputs[i]);
        expect(typeof createdAt).toBe("number");
        expect(seq).toBe(i + 1);
      });
      const more = await store().appendMessages(session.id, [text("next")]);
      expect(more[0].seq).toBe(6);
      expect(await store().countMessages(session.id)).toBe(6);
    });

    it("reads the last N, ranges, and before a seq", async () => {
      const session = await newSession();
      await store().appendMessages(
        session.id,
        Array.from({ length: 30 }, (_, i) => text(`m${i + 1}`)),
      );
      const seqs = async (q: Parameters<FullStore["getMessages"]>[1]) =>
        (await store().getMessages(session.id, q)).map((m) => m.seq);
      expect(await seqs({ last: 3 })).toEqual([28, 29, 30]);
      expect(await seqs({ afterSeq: 27 })).toEqual([28, 29, 30]);
      expect(await seqs({ afterSeq: 10, limit: 2 })).toEqual([11, 12]);
      expect(await seqs({ fromSeq: 5, toSeq: 7 })).toEqual([5, 6, 7]);
      expect(await seqs({ beforeSeq: 4 })).toEqual([1, 2, 3]);
      expect(await seqs({ beforeSeq: 20, last: 2 })).toEqual([18, 19]);
      expect(await seqs({ last: 0 })).toEqual([]);
      expect((await seqs({})).length).toBe(30);
      expect((await store().getMessages(session.id, { last: 1 }))[0].content).toBe("m30");
    });

    it("rejects a bad batch whole and stores nothing of it", async () => {
      const session = await newSession();
      await store().appendMessages(session.id, [text("kept")]);
      const bad = [text("fine"), { role: "wizard", content: "x" }] as unknown as MessageInput[];
      await expectCode(store().appendMessages(session.id, bad), "invalid_message");
      await expectCode(
        store().appendMessages(session.id, [{ role: "user", content: 42 } as unknown as MessageInput]),
        "invalid_message",
      );
      await expectCode(
        store().appendMessages(session.id, [{ role: "tool", content: "no id" } as MessageInput]),
        "invalid_message",
      );
      expect((await store().getMessages(session.id)).map((m) => m.content)).toEqual(["kept"]);
    });

    it("keeps seq contiguous under 100 concurrent appends", async () => {
      const session = await newSession();
      await Promise.all(Array.from({ length: 100 }, (_, i) => store().appendMessages(session.id, [text(`c${i}`)])));
      const all = await store().getMessages(session.id);
      expect(all.map((m) => m.seq)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
      expect(new Set(all.map((m) => m.content)).size).toBe(100);
    });

    it("keeps each concurrent batch adjacent", async () => {
      const session = await newSession();
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store().appendMessages(session.id, [text(`q${i}`), { role: "assistant", content: `a${i}` }]),
        ),
      );
      const all = await store().getMessages(session.id);
      expect(all).toHaveLength(40);
      for (let i = 0; i < all.length; i += 2) {
        expect(all[i].role).toBe("user");
        expect(all[i + 1].content).toBe(`a${String(all[i].content).slice(1)}`);
      }
    });

    it("isolates sessions", async () => {
      const a = await newSession();
      const b = await newSession();
      await store().appendMessages(a.id, [text("only in a")]);
      await store().appendMessages(b.id, [text("only in b"), text("b2")]);
      expect((await store().getMessages(a.id)).map((m) => m.content)).toEqual(["only in a"]);
      expect(await store().countMessages(b.id)).toBe(2);
      expect((await store().appendMessages(a.id, [text("a2")]))[0].seq).toBe(2);
    });

    it("pops the last message and truncates after a seq", async () => {
      const session = await newSession();
      expect(await store().popMessage(session.id)).toBeNull();
      await store().appendMessages(session.id, [text("1"), text("2"), text("3"), text("4"), text("5")]);
      const popped = await store().popMessage(session.id);
      expect(popped?.seq).toBe(5);
      expect(popped?.content).toBe("5");
      expect(await store().truncateAfter(session.id, 2)).toBe(2);
      expect(await store().truncateAfter(session.id, 2)).toBe(0);
      expect((await store().getMessages(session.id)).map((m) => m.seq)).toEqual([1, 2]);
      const [next] = await store().appendMessages(session.id, [text("again")]);
      expect(next.seq).toBe(3);
    });

    it("refuses a write meant for a session deleted and created again under its id", async () => {
      const old = await newSession();
      const guard = { sessionCreatedAt: old.createdAt };
      expect((await store().appendMessages(old.id, [text("1")], guard)).map((m) => m.seq)).toEqual([1]);
      expect((await store().replaceAfter(old.id, 1, [text("2")], guard)).map((m) => m.seq)).toEqual([2]);
      await store().deleteSession(old.id);
      await expectCode(store().appendMessages(old.id, [text("gone")], guard), "session_not_found");
      const again = await store().createSession({ id: old.id, userId: old.userId, createdAt: old.createdAt + 1 });
      await store().appendMessages(again.id, [text("new")]);
      // Every write path refuses: the plain append, an idempotent one, a replacement, a capped one.
      await expectCode(store().appendMessages(again.id, [text("old")], guard), "session_not_found");
      await expectCode(
        store().appendMessages(again.id, [text("old")], { ...guard, operationId: "op-guard" }),
        "session_not_found",
      );
      await expectCode(
        store().appendMessages(again.id, [text("old")], { ...guard, maxMessages: 1, keepUnsummarized: true }),
        "session_not_found",
      );
      await expectCode(store().replaceAfter(again.id, 0, [text("old")], guard), "session_not_found");
      await expectCode(store().appendMessages(again.id, [], guard), "session_not_found");
      expect((await store().getMessages(again.id)).map((m) => [m.seq, m.content])).toEqual([[1, "new"]]);
      const [added] = await store().appendMessages(again.id, [text("same session")], {
        sessionCreatedAt: again.createdAt,
        operationId: "op-guard",
      });
      expect([added.seq, added.content]).toEqual([2, "same session"]);
    });

    it("keeps unicode and 1 MB messages intact", async () => {
      const session = await newSession();
      const samples = [
        "Welke producten heb je daarvoor? 🍎🥦",
        "日本語のテキスト",
        "مرحبا بالعالم",
        "a\u0000b\u2028c",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \"quotes\" 'single' \\ back",
      ];
      const big = "x".repeat(1024 * 1024 - 8) + "🦄end";
      await store().appendMessages(session.id, [...samples.map(text), text(big)]);
      const read = await store().getMessages(session.id);
      expect(read.map((m) => m.content)).toEqual([...samples, big]);
    });
  });
}
