/** Branches travel with their sessions: export → import, and migrate between backends. */
import { afterAll, describe, expect, it } from "vitest";
import { importSessions } from "../../src/transfer/import.js";
import { migrateStores } from "../../src/transfer/migrate.js";
import { newSessionId } from "../../src/core/ids.js";
import type { FullStore } from "../../src/core/types.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { exportAll } from "./_seed.js";
import { storeKinds } from "./_stores.js";

const kinds = await storeKinds();
afterAll(async () => {
  for (const k of kinds) await k.cleanup();
});

/** A capped session (seqs 5–12) with a regenerate and an edit on top of it. */
async function seedBranches(store: FullStore): Promise<string> {
  const id = newSessionId();
  await store.createSession({ id, userId: "alice" });
  const turns = Array.from(
    { length: 12 },
    (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `turn ${i + 1}` }) as const,
  );
  await store.appendMessages(id, [...turns], { maxMessages: 8 });
  await store.replaceAfter(id, 11, [{ role: "assistant", content: "turn 12 again" }], {
    branch: { reason: "regenerate" },
  });
  await store.replaceAfter(id, 8, [{ role: "assistant", content: "turn 9 edited" }], {
    branch: { reason: "edit", metadata: { by: "test" } },
  });
  return id;
}

describe("branches in export, import and migrate", () => {
  it("exports branches in original numbering and imports them back", async () => {
    const source = createMemoryStore({ ttlMs: 0 });
    const id = await seedBranches(source);
    const lines = await exportAll(source);
    const branchLines = lines.map((l) => JSON.parse(l)).filter((r) => r.type === "branch");
    expect(branchLines.map((r) => [r.branch.id, r.branch.atSeq, r.branch.parentId, r.branch.reason])).toEqual([
      [1, 11, 2, "regenerate"],
      [2, 8, null, "edit"],
    ]);
    const target = createMemoryStore({ ttlMs: 0 });
    await importSessions(target, () => lines);
    expect(await exportAll(target)).toEqual(lines);
    // The imported session numbers from 1; its branches switch back as they did in the source.
    await target.switchBranch(id, 2);
    expect((await target.getMessages(id)).map((m) => m.content).at(-1)).toBe("turn 12 again");
    expect((await importSessions(target, () => lines)).counts.diverged).toBe(1);
  });

  for (const kind of kinds.filter((k) => k.name !== "memory")) {
    it.skipIf(kind.enabled !== true)(`migrates branches to ${kind.name}`, async () => {
      const source = createMemoryStore({ ttlMs: 0 });
      const id = await seedBranches(source);
      const target = await kind.open();
      try {
        const report = await migrateStores(source, target);
        expect(report.verification).toMatchObject({ mismatched: [] });
        expect(await exportAll(target)).toEqual(await exportAll(source));
        expect((await migrateStores(source, target)).counts.unchanged).toBe(1);
        await target.switchBranch(id, 2);
        expect((await target.getMessages(id)).map((m) => m.content).slice(-4)).toEqual([
          "turn 9",
          "turn 10",
          "turn 11",
          "turn 12 again",
        ]);
      } finally {
        await target.close();
      }
    });
  }
});
