/**
 * Everything a store keeps moves with a transfer. One fixture holds, for a user, every kind of data
 * each capability of the contract can hold (plus two other users, one with memories and no session);
 * it is moved between every pair of the five stores by `migrateStores` and through a JSONL export,
 * and the target is compared deeply with the source, ownership included. A capability guard added to
 * the contract without an entry in transfer/capabilities.ts, or a carried kind the fixture does not
 * hold, fails here by itself.
 */
import { afterAll, describe, expect, it } from "vitest";
import * as storeTypes from "../../src/core/store-types.js";
import * as vectorTypes from "../../src/core/vector-types.js";
import type { FullStore, Message, UserMemory } from "../../src/core/types.js";
import { CAPABILITY_TRANSFER, type CapabilityGuard } from "../../src/transfer/capabilities.js";
import { exportSessions } from "../../src/transfer/export.js";
import { importSessions } from "../../src/transfer/import.js";
import { migrateStores } from "../../src/transfer/migrate.js";
import { type StoreKind, storeKinds } from "../cli/_stores.js";

const kinds = await storeKinds();
/** One target store of each kind, opened once and emptied after each copy (opening costs more than the copy). */
const targets = new Map<string, FullStore>();
const targetOf = async (kind: StoreKind) => {
  if (!targets.has(kind.name)) targets.set(kind.name, await kind.open());
  return targets.get(kind.name)!;
};
afterAll(async () => {
  for (const t of targets.values()) await t.close();
  for (const k of kinds) await k.cleanup();
});

const USERS = ["alice", "bob", "carol"] as const;
// Recent: the Redis store treats a session past its TTL as gone.
const T0 = Date.now() - 3_600_000;
const ALICE_SESSION = "11111111-1111-4111-8111-111111111111";
const BOB_SESSION = "22222222-2222-4222-8222-222222222222";

/** The contract's capability guards, read from its modules' exports (not from a list kept by hand). */
const guards = Object.entries({ ...storeTypes, ...vectorTypes }).filter(
  ([name, value]) => /^(has|canStore)[A-Z]/.test(name) && typeof value === "function",
) as [CapabilityGuard, (store: FullStore) => boolean][];

/** Builds the fixture through the store contract. */
async function build(store: FullStore): Promise<void> {
  await store.createSession({
    id: ALICE_SESSION,
    userId: "alice",
    metadata: { title: "Trip", tags: ["a"] },
    createdAt: T0,
  });
  await store.appendMessages(ALICE_SESSION, [
    { role: "system", content: "You plan trips." },
    { role: "user", content: "Where to in May?" },
    { role: "assistant", content: "Lisbon.", metadata: { model: "m1" } },
  ]);
  // A regenerated answer: the first one is kept as a branch.
  await store.replaceAfter(ALICE_SESSION, 2, [{ role: "assistant", content: "Porto." }], {
    branch: { reason: "regenerate" },
  });
  await store.appendMessages(ALICE_SESSION, [{ role: "user", content: "Book it" }]);
  await store.saveSummary(ALICE_SESSION, { fromSeq: 1, toSeq: 2, content: "Asked about May.", createdAt: T0 + 5 });
  await store.setState(ALICE_SESSION, { city: "Porto", nights: 3 }, 0);
  await store.touchSession(ALICE_SESSION, T0 + 60_000);
  await store.addUserMemory({
    id: "m-alice-1",
    userId: "alice",
    text: "likes Porto",
    source: { kind: "session", sessionId: ALICE_SESSION, seqs: [3] },
    createdAt: T0 + 10,
  });
  await store.updateUserMemory("alice", "m-alice-1", {
    text: "loves Porto",
    reason: "edit",
    metadata: { confidence: 0.9 },
  });
  await store.addUserMemory({
    id: "m-alice-2",
    userId: "alice",
    text: "vegetarian",
    createdAt: T0 + 20,
    metadata: { by: "hand" },
  });
  // Another user with the same memory id: ownership must never be merged.
  await store.createSession({ id: BOB_SESSION, userId: "bob", metadata: {}, createdAt: T0 + 1 });
  await store.appendMessages(BOB_SESSION, [{ role: "user", content: "hi" }]);
  await store.addUserMemory({ id: "m-alice-1", userId: "bob", text: "bob's own memory", createdAt: T0 + 30 });
  // A user with memories and no session: found only by enumerating memory owners.
  await store.addUserMemory({ id: "m-carol", userId: "carol", text: "prefers email", createdAt: T0 + 40 });
}

/** A stored message in its original time (imports keep it in metadata). */
function original(m: Message): Message {
  const { importedCreatedAt, ...metadata } = m.metadata ?? {};
  const out: Message = { ...m, createdAt: typeof importedCreatedAt === "number" ? importedCreatedAt : m.createdAt };
  if (Object.keys(metadata).length > 0) out.metadata = metadata;
  else delete out.metadata;
  return out;
}

/** Everything the store holds for the fixture's users, read through the contract (not through transfer code). */
async function snapshot(store: FullStore) {
  const sessions = [];
  for (const userId of USERS) {
    for (const s of (await store.listSessions(userId, { limit: 100 })).sessions) {
      sessions.push({
        session: { ...s, metadata: s.metadata ?? {} },
        messages: (await store.getMessages(s.id)).map(original),
        summaries: (await store.listSummaries(s.id)).map(({ id: _id, ...rest }) => ({
          ...rest,
          metadata: rest.metadata ?? {},
        })),
        state: (await store.getState(s.id)).data,
        branches: (await store.listBranches(s.id)).map((b) => ({
          ...b,
          metadata: b.metadata ?? {},
          messages: b.messages.map(original),
        })),
      });
    }
  }
  const memories: Record<string, UserMemory[]> = {};
  for (const userId of USERS) memories[userId] = (await store.listUserMemories(userId, { limit: 100 })).memories;
  const owners = (await store.listMemoryOwners({ limit: 100 })).userIds;
  return { sessions, memories, owners };
}
type Snapshot = Awaited<ReturnType<typeof snapshot>>;

/** What the fixture must hold for each carried capability: a transfer that drops it then fails the comparison. */
const HOLDS: Record<CapabilityGuard, ((s: Snapshot) => boolean) | "not-data"> = {
  hasBranches: (s) => s.sessions.some((x) => x.branches.length > 0),
  hasSummaries: (s) => s.sessions.some((x) => x.summaries.length > 0),
  hasState: (s) => s.sessions.some((x) => Object.keys(x.state).length > 0),
  hasUserMemories: (s) => s.memories.alice.some((m) => m.history.length > 0 && m.source.kind === "session"),
  hasMemoryOwners: (s) => s.owners.includes("carol"),
  hasRetention: "not-data",
  hasSearch: "not-data",
  hasCounts: "not-data",
  hasCombinedTurn: "not-data",
  hasRangeReads: "not-data",
  hasSessionBatchReads: "not-data",
  canStoreVectors: "not-data",
  canStoreMemoryVectors: "not-data",
};

/** Empties what the fixture wrote, so one target store serves every source. */
async function clear(store: FullStore): Promise<void> {
  for (const id of [ALICE_SESSION, BOB_SESSION]) await store.deleteSession(id);
  for (const userId of USERS) await store.deleteUserMemories(userId);
}

describe("the transfer covers the contract", () => {
  it("has an entry for every capability guard of the contract, and the fixture holds every carried kind", () => {
    expect(guards.length).toBeGreaterThanOrEqual(10);
    expect(Object.keys(CAPABILITY_TRANSFER).sort()).toEqual(guards.map(([name]) => name).sort());
    expect(Object.keys(HOLDS).sort()).toEqual(guards.map(([name]) => name).sort());
    for (const [name, entry] of Object.entries(CAPABILITY_TRANSFER)) {
      expect([name, HOLDS[name as CapabilityGuard] === "not-data"]).toEqual([name, entry.treatment !== "carried"]);
    }
  });
});

const enabled = kinds.filter((k) => k.enabled === true);
const skipped = kinds.filter((k) => k.enabled !== true);

describe.each(enabled.map((k) => [k.name, k] as const))("from %s", (_name, sourceKind: StoreKind) => {
  it(`moves everything to every store (${enabled.map((k) => k.name).join(", ")}${skipped.length ? `; skipped: ${skipped.map((k) => `${k.name} (${k.enabled})`).join(", ")}` : ""}), by migrate and through JSONL`, async () => {
    const source = await sourceKind.open();
    await build(source);
    const expected = await snapshot(source);
    for (const [guard, holds] of Object.entries(HOLDS)) {
      const has = guards.find(([n]) => n === guard)![1](source);
      if (holds !== "not-data" && has) expect([guard, holds(expected)]).toEqual([guard, true]);
    }
    const lines: string[] = [];
    await exportSessions(source, { all: true }, (line) => void lines.push(line));
    for (const targetKind of enabled) {
      const target = await targetOf(targetKind);
      const report = await migrateStores(source, target);
      expect(report.problems).toEqual([]);
      expect(report.verification).toMatchObject({
        sessions: 2,
        sessionsOk: 2,
        memories: 4,
        memoriesOk: 4,
        mismatched: [],
      });
      expect([targetKind.name, await snapshot(target)]).toEqual([targetKind.name, expected]);
      await clear(target);
      const imported = await importSessions(target, () => lines);
      expect(imported.problems).toEqual([]);
      expect(imported.memories).toEqual({ created: 4, unchanged: 0, diverged: 0 });
      expect([`${targetKind.name} (jsonl)`, await snapshot(target)]).toEqual([`${targetKind.name} (jsonl)`, expected]);
      await clear(target);
    }
    await source.close();
  });
});
