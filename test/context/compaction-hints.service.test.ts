/**
 * Compaction after a write reads the store only when something may be due: through the public API,
 * over every real store, with the store's calls counted. A 60-turn session gets the same summaries
 * and cap as a Memory that checks after every write; the turns where nothing is due cost the append
 * alone; and summaries, caps and re-creations by another Memory on the same session (a stale hint)
 * never leave due work undone.
 */
import { afterAll, describe, expect, it, vi } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { Memory } from "../../src/core/memory/memory.js";
import { createMemory } from "../../src/create-memory.js";
import { compactSession } from "../../src/core/context/compaction.js";
import type { Summarizer } from "../../src/core/context/summarize.js";
import type { MessageInput, FullStore } from "../../src/core/types.js";
import { storeKinds } from "../cli/_stores.js";

const kinds = await storeKinds();
afterAll(async () => {
  for (const kind of kinds) await kind.cleanup();
});

/** The reads a compaction check makes. */
const CHECK_READS = new Set(["listSummaries", "getMessages", "countMessages"]);

/** The store with every method call recorded by name. */
function counted(store: FullStore): { store: FullStore; calls: string[] } {
  const calls: string[] = [];
  const wrapped = new Proxy(store, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        calls.push(String(prop));
        return value.apply(target, args);
      };
    },
  });
  return { store: wrapped, calls };
}

/** A summarizer whose text depends only on what it was given, so two runs can be compared. */
const summarizer: Summarizer = {
  summarize: async ({ messages, previous }) =>
    `${previous ? `${previous.content} + ` : ""}${messages[0].seq}..${messages[messages.length - 1].seq}`,
};

const SETTINGS = { window: 10, maxMessages: 30, ttlMs: 0, compaction: { threshold: 6 } };
const memoryOver = (store: FullStore, settings: Partial<typeof SETTINGS> = {}) =>
  createMemory({ store, summarizer, ...SETTINGS, ...settings });

const turn = (i: number): MessageInput[] => [
  { role: "user", content: `question ${i}` },
  { role: "assistant", content: `answer ${i}` },
];

/** What compaction made of a session: its summaries and the seqs it keeps. */
async function shapeOf(store: FullStore, id: string) {
  const summaries = (await store.listSummaries(id)).map((s) => `${s.fromSeq}-${s.toSeq}: ${s.content}`);
  const seqs = (await store.getMessages(id)).map((m) => m.seq);
  const reach = Math.max(0, ...(await store.listSummaries(id)).map((s) => s.toSeq));
  return { summaries, reach, first: seqs[0] ?? 1, last: seqs.at(-1), count: seqs.length };
}

/**
 * The behaviour before hints, as a reference: append, then the full compaction check after every
 * write (what `Memory` ran after each write with a summarizer).
 */
function checkingEveryWrite(store: FullStore, using: Summarizer, settings: typeof SETTINGS) {
  return async (id: string, messages: MessageInput[]) => {
    if (!(await store.getSession(id))) await store.createSession({ id, userId: "default" });
    await store.appendMessages(id, messages);
    await compactSession(store, id, using, {
      window: settings.window,
      maxMessages: settings.maxMessages,
      threshold: settings.compaction.threshold,
      maxBatch: 100,
    });
  };
}

/** Fails when a check now would still find work: a summary to write or messages to drop. */
async function expectNothingLeftDue(oracle: Memory, id: string, turnNo: number) {
  const result = await oracle.compact(id);
  expect({ turn: turnNo, summary: result.summary?.toSeq, dropped: result.dropped }).toEqual({
    turn: turnNo,
    summary: undefined,
    dropped: 0,
  });
}

/**
 * Two processes on one store: this one learns the session's shape (summarised up to some seq); the
 * other deletes the session, creates it again and writes past the last seq this one saw, while its
 * summaries fail (nothing of the new session is summarised). This one then writes on: within its
 * hint's age it must drop none of the new session's messages that no summary covers, and its
 * compaction must catch up (summarise, then cap) within a few turns.
 */
async function recreatedElsewhere(raw: FullStore) {
  const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
  const mine = memoryOver(raw);
  const down: Summarizer = { summarize: () => Promise.reject(new Error("summary model down")) };
  const other = createMemory({ store: raw, summarizer: down, ...SETTINGS });
  const id = newSessionId();
  for (let i = 1; i <= 25; i++) await mine.addMessages(id, turn(i));
  const seen = (await shapeOf(raw, id)).last!;
  expect((await shapeOf(raw, id)).reach).toBeGreaterThan(seen - SETTINGS.maxMessages);
  await other.deleteSession(id);
  for (let i = 1; i * 2 <= seen + 2; i++) await other.addMessages(id, turn(100 + i));
  const before = await shapeOf(raw, id);
  expect(before).toMatchObject({ reach: 0, first: 1 });
  await mine.addMessages(id, turn(26));
  const after = await shapeOf(raw, id);
  expect(after.last).toBe(before.last! + 2);
  // Dropped (first moved on) only as far as a summary of the new session reaches.
  expect({ dropped: after.first - 1, reach: after.reach }, "no unsummarised message is dropped").toEqual({
    dropped: Math.min(after.first - 1, after.reach),
    reach: after.reach,
  });
  for (let i = 27; i <= 30; i++) {
    await mine.addMessages(id, turn(i));
    const now = await shapeOf(raw, id);
    expect(now.first - 1, `turn ${i}: the cap drops only summarised messages`).toBeLessThanOrEqual(now.reach);
  }
  expect((await shapeOf(raw, id)).count).toBeLessThanOrEqual(SETTINGS.maxMessages);
  warn.mockRestore();
  await mine.idle();
  await other.idle();
}

describe.each(kinds.map((k) => [k.name, k] as const))("compaction after writes on the %s store", (_name, kind) => {
  const skip = kind.enabled === true ? false : kind.enabled;

  it.skipIf(skip).each([
    ["a cap well above the window", SETTINGS],
    ["a cap inside window + threshold", { ...SETTINGS, window: 12, maxMessages: 16, compaction: { threshold: 10 } }],
  ])(
    "a 60-turn session gets the summaries and cap of a check after every write, and quiet turns read nothing (%s)",
    async (_case, settings) => {
      const raw = await kind.open();
      const { store, calls } = counted(raw);
      const hinted = memoryOver(store, settings);
      const everyWrite = checkingEveryWrite(raw, summarizer, settings);
      const [a, b] = [newSessionId(), newSessionId()];
      let before = await shapeOf(raw, a);
      const turns = { summarised: 0, capped: 0, quiet: 0 };
      for (let i = 1; i <= 60; i++) {
        calls.length = 0;
        await hinted.addMessages(a, turn(i));
        const made = calls.slice();
        await everyWrite(b, turn(i));
        const after = await shapeOf(raw, a);
        expect({ turn: i, ...after }).toEqual({ turn: i, ...(await shapeOf(raw, b)) });
        expect(after.first - 1, "the cap drops only summarised messages").toBeLessThanOrEqual(after.reach);
        const reads = made.filter((c) => CHECK_READS.has(c));
        // The first turn also creates the session (a refused owner-scoped append, then the usual path).
        const writes = made.filter((c) => !CHECK_READS.has(c)).slice(i === 1 ? -1 : 0);
        if (after.summaries.length !== before.summaries.length) {
          turns.summarised++;
          expect(reads.length, `turn ${i} summarised`).toBeGreaterThan(0);
        } else if (before.count > 0 && after.first !== before.first) {
          // Only the cap was due, over summarised messages: the append itself kept the newest
          // (bounded by the summaries, keepUnsummarized), nothing is read and nothing else written.
          turns.capped++;
          expect({ turn: i, reads, writes }).toEqual({ turn: i, reads: [], writes: ["appendMessages"] });
        } else {
          turns.quiet++;
          expect({ turn: i, reads, writes }).toEqual({ turn: i, reads: [], writes: ["appendMessages"] });
        }
        before = after;
      }
      const final = await shapeOf(raw, a);
      expect(final.summaries.length).toBeGreaterThanOrEqual(5);
      expect(final.count).toBeLessThanOrEqual(settings.maxMessages);
      expect(final.last).toBe(120);
      expect(turns.quiet + turns.capped).toBeGreaterThan(turns.summarised);
      expect(turns.capped).toBeGreaterThan(0);
      await hinted.idle();
      await raw.close();
    },
  );

  it.skipIf(skip)("while summaries fail the cap drops nothing unsummarised, and both catch up as before", async () => {
    const raw = await kind.open();
    let failing = false;
    const flaky: Summarizer = {
      summarize: (request) =>
        failing ? Promise.reject(new Error("summary model down")) : summarizer.summarize(request),
    };
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const hinted = createMemory({ store: raw, summarizer: flaky, ...SETTINGS });
    const everyWrite = checkingEveryWrite(raw, flaky, SETTINGS);
    const [a, b] = [newSessionId(), newSessionId()];
    for (let i = 1; i <= 50; i++) {
      failing = i >= 14 && i < 24;
      await hinted.addMessages(a, turn(i));
      await everyWrite(b, turn(i));
      const after = await shapeOf(raw, a);
      expect({ turn: i, ...after }).toEqual({ turn: i, ...(await shapeOf(raw, b)) });
      expect(after.first - 1, "the cap drops only summarised messages").toBeLessThanOrEqual(after.reach);
    }
    expect((await shapeOf(raw, a)).count).toBeLessThanOrEqual(30);
    warn.mockRestore();
    await hinted.idle();
    await raw.close();
  });

  it.skipIf(skip)(
    "summaries and caps made by another Memory on the same session leave no due work undone",
    async () => {
      const raw = await kind.open();
      const { store, calls } = counted(raw);
      const mine = memoryOver(store);
      // Another process: summarises eagerly and caps tighter, so what this one remembers goes stale.
      const other = memoryOver(raw, { window: 4, maxMessages: 12, compaction: { threshold: 1 } });
      const oracle = memoryOver(raw);
      const id = newSessionId();
      let reads = 0;
      for (let i = 1; i <= 60; i++) {
        const writer = i % 10 >= 7 ? other : mine;
        calls.length = 0;
        await writer.addMessages(id, turn(i));
        reads += calls.filter((c) => CHECK_READS.has(c)).length;
        // What this Memory's settings make due must be done after each of its own writes.
        if (writer === mine) await expectNothingLeftDue(oracle, id, i);
      }
      const final = await shapeOf(raw, id);
      expect(final.last).toBe(120);
      expect(final.count).toBeLessThanOrEqual(30);
      // The summaries build on each other whoever wrote them: one line from the first message on.
      const summaries = await raw.listSummaries(id);
      expect(summaries.every((s) => s.fromSeq === 1)).toBe(true);
      const reach = summaries.map((s) => s.toSeq);
      expect(reach).toEqual([...reach].sort((x, y) => x - y));
      expect(reads).toBeGreaterThan(0);
      await mine.idle();
      await other.idle();
      await raw.close();
    },
  );

  it.skipIf(skip)(
    "a session deleted and created again by another process keeps its unsummarised messages when this one writes next",
    async () => {
      const raw = await kind.open();
      await recreatedElsewhere(raw);
      await raw.close();
    },
  );

  it.skipIf(skip)("a session removed, trimmed or created again elsewhere is checked again", async () => {
    const raw = await kind.open();
    const mine = memoryOver(raw);
    const other = memoryOver(raw);
    const oracle = memoryOver(raw);
    const id = newSessionId();
    for (let i = 1; i <= 25; i++) await mine.addMessages(id, turn(i));
    await expectNothingLeftDue(oracle, id, 25);
    // Another process deletes the session and grows a new one under the same id past the window.
    await other.deleteSession(id);
    for (let i = 1; i <= 12; i++) await other.addMessages(id, turn(100 + i));
    await mine.addMessages(id, turn(26));
    await expectNothingLeftDue(oracle, id, 26);
    const summaries = await raw.listSummaries(id);
    expect(summaries.at(-1)!.content).toMatch(/^1\.\./);
    // Trimmed from the tail elsewhere: the next write reuses seqs, and is checked.
    await other.replaceAfter(id, 20, []);
    for (let i = 27; i <= 40; i++) {
      await mine.addMessages(id, turn(i));
      await expectNothingLeftDue(oracle, id, i);
    }
    await mine.idle();
    await raw.close();
  });
});
