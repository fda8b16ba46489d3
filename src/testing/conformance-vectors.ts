/**
 * The embeddings part of the store conformance suite (run by `describeStore`): a store whose
 * capabilities say `vectors` stores, finds and forgets message embeddings the same way on every backend.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../core/ids.js";
import { canStoreVectors, type MessageInput, type FullStore, type VectorStore } from "../core/types.js";
import { expectCode } from "./_conformance-fixtures.js";

const text = (content: string): MessageInput => ({ role: "user", content });

/** Registers the vector tests; `store()` gives the suite's open store. */
export function describeVectors(store: () => FullStore, name: string): void {
  const vectors = (ctx: { skip: (reason: string) => void }): FullStore & VectorStore => {
    const s = store();
    if (!canStoreVectors(s)) ctx.skip(`${name} keeps no embeddings`);
    return s as FullStore & VectorStore;
  };
  // A model name per test: the model's dimensions are recorded store-wide.
  const model = () => `model-${randomUUID()}`;
  const session = (s: VectorStore, userId: string) => s.createSession({ id: newSessionId(), userId });

  describe("vectors", () => {
    it("finds the nearest of one owner's messages, best first, by model, session and seq bounds", async (ctx) => {
      const s = vectors(ctx);
      const owner = `user-${randomUUID()}`;
      const m = model();
      const [a, b, stranger] = [
        await session(s, owner),
        await session(s, owner),
        await session(s, `user-${randomUUID()}`),
      ];
      const [car, banana] = await s.appendMessages(a.id, [text("my car"), text("a banana")]);
      const [truck] = await s.appendMessages(b.id, [text("a truck")]);
      const [secret] = await s.appendMessages(stranger.id, [text("a car of another owner")]);
      expect(await s.missingEmbeddings(a.id, m)).toEqual([1, 2]);
      await s.putEmbeddings(a.id, m, [
        { seq: car.seq, createdAt: car.createdAt, vector: [1, 0, 0] },
        { seq: banana.seq, createdAt: banana.createdAt, vector: [0, 2, 0] },
      ]);
      await s.putEmbeddings(b.id, m, [{ seq: truck.seq, createdAt: truck.createdAt, vector: [0.9, 0.1, 0] }]);
      await s.putEmbeddings(stranger.id, m, [{ seq: secret.seq, createdAt: secret.createdAt, vector: [1, 0, 0] }]);
      expect(await s.missingEmbeddings(a.id, m)).toEqual([]);
      expect(await s.missingEmbeddings(a.id, model())).toEqual([1, 2]);

      const hits = await s.searchVectors({ userId: owner, model: m, vector: [2, 0, 0], limit: 2 });
      expect(hits.map((h) => [h.sessionId, h.seq, h.message.content])).toEqual([
        [a.id, 1, "my car"],
        [b.id, 1, "a truck"],
      ]);
      expect(hits[0].score).toBeCloseTo(1, 5);
      expect(hits[1].score).toBeLessThan(hits[0].score);
      const all = await s.searchVectors({ userId: owner, model: m, vector: [0, 1, 0] });
      expect(all.map((h) => h.message.content)).toEqual(["a banana", "a truck", "my car"]);
      expect(all.some((h) => h.sessionId === stranger.id)).toBe(false);
      const inA = await s.searchVectors({ userId: owner, model: m, vector: [1, 0, 0], sessionId: a.id, afterSeq: 1 });
      expect(inA.map((h) => h.seq)).toEqual([2]);
      const before = await s.searchVectors({
        userId: owner,
        model: m,
        vector: [0, 1, 0],
        sessionId: a.id,
        beforeSeq: 2,
      });
      expect(before.map((h) => h.seq)).toEqual([1]);
      // Naming another owner's session returns nothing of it.
      expect(await s.searchVectors({ userId: owner, model: m, vector: [1, 0, 0], sessionId: stranger.id })).toEqual([]);
      expect(await s.searchVectors({ userId: owner, model: model(), vector: [1, 0, 0] })).toEqual([]);
    });

    it("refuses mixed dimensions and forgets the vectors of removed messages", async (ctx) => {
      const s = vectors(ctx);
      const owner = `user-${randomUUID()}`;
      const m = model();
      const [a, b] = [await session(s, owner), await session(s, owner)];
      const [one, two] = await s.appendMessages(a.id, [text("one"), text("two")]);
      const [three] = await s.appendMessages(b.id, [text("three")]);
      await s.putEmbeddings(a.id, m, [
        { seq: one.seq, createdAt: one.createdAt, vector: [1, 0, 0] },
        { seq: two.seq, createdAt: two.createdAt, vector: [0, 1, 0] },
      ]);
      await expectCode(
        s.putEmbeddings(b.id, m, [{ seq: three.seq, createdAt: three.createdAt, vector: [1, 0, 0, 0] }]),
        "embedding_dimension_mismatch",
      );
      await expectCode(s.searchVectors({ userId: owner, model: m, vector: [1, 0] }), "embedding_dimension_mismatch");
      await expectCode(s.putEmbeddings(newSessionId(), m, []), "session_not_found");
      // A vector for a message that is not (or no longer) there is ignored.
      await s.putEmbeddings(b.id, m, [{ seq: 99, createdAt: three.createdAt, vector: [1, 0, 0] }]);
      await s.truncateAfter(a.id, 1);
      const left = await s.searchVectors({ userId: owner, model: m, vector: [0, 1, 0] });
      expect(left.map((h) => h.message.content)).toEqual(["one"]);
      await s.deleteSession(a.id);
      expect(await s.searchVectors({ userId: owner, model: m, vector: [1, 0, 0] })).toEqual([]);
    });

    it("keeps the last of several vectors for one message, within a call and across calls", async (ctx) => {
      const s = vectors(ctx);
      const owner = `user-${randomUUID()}`;
      const m = model();
      const a = await session(s, owner);
      const [one, two] = await s.appendMessages(a.id, [text("one"), text("two")]);
      const at = (x: typeof one, vector: number[]) => ({ seq: x.seq, createdAt: x.createdAt, vector });
      await s.putEmbeddings(a.id, m, [at(one, [1, 0]), at(two, [0, 1]), at(one, [0, 1])]);
      const near = async (vector: number[]) =>
        (await s.searchVectors({ userId: owner, model: m, vector, limit: 1 }))[0];
      expect((await near([0, 1])).score).toBeCloseTo(1, 5);
      expect(
        (await s.searchVectors({ userId: owner, model: m, vector: [1, 0] })).map((h) => h.score.toFixed(3)),
      ).toEqual(["0.000", "0.000"]);
      await s.putEmbeddings(a.id, m, [at(two, [1, 0])]);
      expect((await near([1, 0])).message.content).toBe("two");
    });

    it("records the dimensions of several new models at once (concurrent first embeddings)", async (ctx) => {
      const s = vectors(ctx);
      const owner = `user-${randomUUID()}`;
      const models = [model(), model(), model(), model()];
      const sessions = await Promise.all(models.map(() => session(s, owner)));
      const added = await Promise.all(sessions.map((x, i) => s.appendMessages(x.id, [text(`note ${i}`)])));
      await Promise.all(
        sessions.map((x, i) =>
          s.putEmbeddings(x.id, models[i], [
            { seq: added[i][0].seq, createdAt: added[i][0].createdAt, vector: [i + 1, 1] },
          ]),
        ),
      );
      for (const [i, m] of models.entries()) {
        const hits = await s.searchVectors({ userId: owner, model: m, vector: [i + 1, 1] });
        expect(hits.map((h) => h.message.content)).toEqual([`note ${i}`]);
        await expectCode(
          s.searchVectors({ userId: owner, model: m, vector: [1, 1, 1] }),
          "embedding_dimension_mismatch",
        );
      }
    });
  });
}
