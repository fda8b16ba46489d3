import { describe, expect, it } from "vitest";
import { fingerprintOf, IdempotencyCache, type TurnOutcome } from "./idempotency.js";

const outcome: TurnOutcome = { kind: "json", status: 200, headers: {}, body: { ok: 1 } };

describe("IdempotencyCache", () => {
  it("gives the first caller the turn and later callers its outcome, waiting while it runs", async () => {
    const cache = new IdempotencyCache();
    const first = await cache.begin("k", "f");
    expect(first.first).toBe(true);
    const waiting = cache.begin("k", "f");
    if (first.first) first.settle(outcome);
    expect(await waiting).toEqual({ first: false, outcome });
  });

  it("forgets a failed first attempt so a retry runs", async () => {
    const cache = new IdempotencyCache();
    const first = await cache.begin("k", "f");
    const retry = cache.begin("k", "f");
    if (first.first) first.settle(undefined);
    expect((await retry).first).toBe(true);
  });

  it("refuses a key reused with another body, and expires and evicts entries", async () => {
    const cache = new IdempotencyCache({ ttlMs: 20, maxEntries: 2 });
    const first = await cache.begin("k", fingerprintOf({ a: 1 }));
    if (first.first) first.settle(outcome);
    await expect(cache.begin("k", fingerprintOf({ a: 2 }))).rejects.toMatchObject({
      code: "invalid_request",
    });
    await new Promise((r) => setTimeout(r, 30));
    expect((await cache.begin("k", fingerprintOf({ a: 2 }))).first).toBe(true);
    await cache.begin("x", "f");
    await cache.begin("y", "f");
    expect(cache.size).toBe(2);
  });
});
