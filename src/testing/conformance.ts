/**
 * The store conformance suite: every backend runs these same assertions through `runStoreConformance`,
 * the five built-in stores and any third-party store alike (published as `threadkeep/testing`; it runs
 * under vitest, an optional peer dependency of this subpath only).
 * A backend that lacks a feature declares it in `capabilities` and the matching tests are skipped;
 * an assertion is never loosened for one backend.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completeStore } from "../core/store/complete.js";
import type { FullStore } from "../core/types.js";
import { type OpenStore, sessionMaker, text } from "./_conformance-fixtures.js";
import { describeSummaryBoundedCap } from "./conformance-cap.js";
import { describeHistory } from "./conformance-history.js";
import { describeTurnLease } from "./conformance-lease.js";
import { describeMessages } from "./conformance-messages.js";
import { describeRetention } from "./conformance-retention.js";
import { describeExpiry, type OpenStoreWithTtl } from "./conformance-expiry.js";
import { describeSearch } from "./conformance-search.js";
import { describeSessions } from "./conformance-sessions.js";
import { describeSummariesAndState } from "./conformance-summaries-and-state.js";
import { describeVectors } from "./conformance-vectors.js";
import { describeOwnerScope } from "./conformance-owner.js";
import { describeRangeReads } from "./conformance-ranges.js";
import { describeTurns } from "./conformance-turn.js";
import { describeUserMemories } from "./conformance-user-memories.js";

/** Options of {@link runStoreConformance}. */
export interface ConformanceOptions {
  /** True to run; a string is the reason the suite is skipped (printed). @default true */
  enabled?: true | string;
  /**
   * Opens the store with an inactivity TTL of its own (`ttlMs` of the memory and Redis stores), for the
   * tests of a session past it (`conformance-expiry.ts`). Leave it out for a store that keeps every
   * session until `expire()` or a delete: those tests are then skipped.
   */
  withTtl?: OpenStoreWithTtl;
}

/**
 * Declares the conformance suite for one store (call it at the top level of a vitest test file).
 * @param name Shown in the test names.
 * @param openStore Opens the store; see {@link OpenStore}.
 */
export function runStoreConformance(name: string, openStore: OpenStore, options: ConformanceOptions = {}): void {
  // Every test runs through completeStore, as Memory would: a store is judged with the fallbacks
  // threadkeep lays over what it lacks, and tests of a capability it lacks skip, saying which.
  const target = { name, create: async (): Promise<FullStore> => completeStore(await openStore()) };
  const enabled = options.enabled ?? true;
  if (enabled !== true) {
    console.warn(`[conformance] skipping ${target.name}: ${enabled}`);
    describe.skip(`${target.name} store conformance (${enabled})`, () => {
      it("is skipped", () => {});
    });
    return;
  }

  describe(`${target.name} store conformance`, () => {
    let store: FullStore;
    beforeAll(async () => {
      store = await target.create();
    });
    afterAll(async () => {
      await store?.close();
    });

    const newSession = sessionMaker(() => store);

    describeSessions(() => store);
    describeMessages(() => store);
    describeRetention(() => store);
    describeExpiry(() => store, target.name, options.withTtl);
    describeSummariesAndState(() => store);
    describeSearch(() => store, target.name);
    describeTurnLease(() => store, target);

    describeVectors(() => store, target.name);
    describeOwnerScope(() => store);
    describeRangeReads(() => store);
    describeTurns(() => store);
    describeSummaryBoundedCap(() => store);
    describeUserMemories(() => store);

    describeHistory(
      () => store,
      async () => {
        await store.close();
        store = await target.create();
        return store;
      },
    );

    describe("persistence", () => {
      it("keeps sessions, messages, summaries and state across close and reopen", async (ctx) => {
        if (!store.capabilities.persistent) ctx.skip(`${target.name} is not persistent`);
        const session = await newSession();
        await store.appendMessages(session.id, [text("remember me"), { role: "assistant", content: "I will." }]);
        await store.saveSummary(session.id, { fromSeq: 1, toSeq: 2, content: "greeting" });
        await store.setState(session.id, { entities: ["task:7"] }, 0);
        await store.close();
        store = await target.create();
        expect((await store.getSession(session.id))?.userId).toBe(session.userId);
        expect((await store.getMessages(session.id)).map((m) => [m.seq, m.content])).toEqual([
          [1, "remember me"],
          [2, "I will."],
        ]);
        expect((await store.listSummaries(session.id))[0].content).toBe("greeting");
        expect(await store.getState(session.id)).toEqual({ version: 1, data: { entities: ["task:7"] } });
        expect((await store.appendMessages(session.id, [text("more")]))[0].seq).toBe(3);
      });

      it("closes idempotently", async () => {
        const extra = await target.create();
        await extra.close();
        await extra.close();
      });
    });
  });
}
