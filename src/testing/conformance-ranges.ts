/**
 * Reading several ranges at once (`getMessageRanges`, {@link RangeReadStore}) in the store conformance
 * suite: one array per range in the order asked, each oldest first, across sessions; scoped to the
 * owner in the same step, a session missing, another owner's, inactive since `activeSince` or deleted
 * reading as empty. Every store runs it: natively, or as `completeStore` derives it from `getMessages`.
 */
import { describe, expect, it } from "vitest";
import { newSessionId } from "../core/ids.js";
import type { FullStore, Message } from "../core/types.js";
import { text, user } from "./_conformance-fixtures.js";

const contents = (ranges: Message[][]) => ranges.map((range) => range.map((m) => [m.seq, m.content]));

/** Registers the range-read tests; `store()` gives the suite's open store. */
export function describeRangeReads(store: () => FullStore): void {
  describe("reading several ranges at once", () => {
    /** An owner with two sessions of five messages each (`a1`…`a5`, `b1`…`b5`). */
    const setup = async () => {
      const owner = user();
      const [a, b] = await Promise.all(
        ["a", "b"].map(async (name) => {
          const session = await store().createSession({ id: newSessionId(), userId: owner });
          await store().appendMessages(
            session.id,
            [1, 2, 3, 4, 5].map((n) => text(`${name}${n}`)),
          );
          return session.id;
        }),
      );
      return { owner, a, b };
    };

    it("answers one array per range, in the order asked, each oldest first, across sessions", async () => {
      const { owner, a, b } = await setup();
      const read = await store().getMessageRanges(
        [
          { sessionId: b, fromSeq: 4, toSeq: 5 },
          { sessionId: a, fromSeq: 2, toSeq: 3 },
          { sessionId: b, fromSeq: 1, toSeq: 1 },
          { sessionId: a, fromSeq: 3, toSeq: 4 }, // overlaps the second
          { sessionId: a, fromSeq: 2, toSeq: 3 }, // repeats it
          { sessionId: a, fromSeq: 5, toSeq: 9 }, // past the last message
          { sessionId: a, fromSeq: 0, toSeq: 1 }, // before the first
          { sessionId: b, fromSeq: 4, toSeq: 3 }, // empty
        ],
        { userId: owner },
      );
      expect(contents(read)).toEqual([
        [
          [4, "b4"],
          [5, "b5"],
        ],
        [
          [2, "a2"],
          [3, "a3"],
        ],
        [[1, "b1"]],
        [
          [3, "a3"],
          [4, "a4"],
        ],
        [
          [2, "a2"],
          [3, "a3"],
        ],
        [[5, "a5"]],
        [[1, "a1"]],
        [],
      ]);
      expect(read[0][0]).toEqual((await store().getMessages(b, { fromSeq: 4, toSeq: 4 }))[0]);
      expect(await store().getMessageRanges([], { userId: owner })).toEqual([]);
    });

    it("reads another owner's, a missing and a deleted session as empty, the owner's beside them in full", async () => {
      const { owner, a, b } = await setup();
      const stranger = await setup();
      const gone = await store().createSession({ id: newSessionId(), userId: owner });
      await store().appendMessages(gone.id, [text("gone1"), text("gone2")]);
      await store().deleteSession(gone.id);
      const read = await store().getMessageRanges(
        [
          { sessionId: stranger.a, fromSeq: 1, toSeq: 5 },
          { sessionId: a, fromSeq: 1, toSeq: 1 },
          { sessionId: newSessionId(), fromSeq: 1, toSeq: 5 },
          { sessionId: gone.id, fromSeq: 1, toSeq: 2 },
          { sessionId: b, fromSeq: 5, toSeq: 5 },
        ],
        { userId: owner },
      );
      expect(contents(read)).toEqual([[], [[1, "a1"]], [], [], [[5, "b5"]]]);
      // The stranger reads their own, and nothing of the owner's.
      expect(
        contents(
          await store().getMessageRanges(
            [
              { sessionId: a, fromSeq: 1, toSeq: 5 },
              { sessionId: stranger.b, fromSeq: 2, toSeq: 2 },
            ],
            { userId: stranger.owner },
          ),
        ),
      ).toEqual([[], [[2, "b2"]]]);
    });

    it("reads a session inactive since activeSince as empty, and one active exactly at it in full", async () => {
      const { owner, a, b } = await setup();
      await store().touchSession(a, Date.now() - 10 * 60_000);
      const { lastActivityAt } = (await store().getSession(b))!;
      const ranges = [
        { sessionId: a, fromSeq: 1, toSeq: 2 },
        { sessionId: b, fromSeq: 1, toSeq: 2 },
      ];
      expect(contents(await store().getMessageRanges(ranges, { userId: owner, activeSince: lastActivityAt }))).toEqual([
        [],
        [
          [1, "b1"],
          [2, "b2"],
        ],
      ]);
      expect(
        contents(await store().getMessageRanges(ranges, { userId: owner, activeSince: lastActivityAt + 60_000 })),
      ).toEqual([[], []]);
    });
  });
}
