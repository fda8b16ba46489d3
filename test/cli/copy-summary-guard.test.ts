/**
 * The copy paths (import, migrate, fork) save summaries only into the session they copy to: one
 * deleted and created again under its id meanwhile refuses them (`session_not_found`), as compaction's
 * saves do, instead of getting a stale summary whose range could let the cap drop its messages.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { importSessions } from "../../src/transfer/import.js";
import { isThreadkeepError } from "../../src/core/errors.js";
import { newSessionId } from "../../src/core/ids.js";
import { createMemory } from "../../src/create-memory.js";
import type { FullStore } from "../../src/core/types.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { exportAll } from "./_seed.js";

const dir = mkdtempSync(join(tmpdir(), "tk-summary-guard-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `store`, except that its first summary save finds the session deleted and created again. */
function recreatedBeforeFirstSummary(store: FullStore): FullStore {
  let done = false;
  return new Proxy(store, {
    get(target, name, receiver) {
      if (name !== "saveSummary") return Reflect.get(target, name, receiver);
      return async (id: string, input: Parameters<FullStore["saveSummary"]>[1]) => {
        if (!done) {
          done = true;
          const old = (await target.getSession(id))!;
          await target.deleteSession(id);
          await target.createSession({ id, userId: old.userId, createdAt: old.createdAt + 1 });
        }
        return target.saveSummary(id, input);
      };
    },
  });
}

/** A session with messages and a summary of the first two. */
async function summarized(store: FullStore): Promise<string> {
  const id = newSessionId();
  await store.createSession({ id, userId: "alice" });
  await store.appendMessages(id, [
    { role: "user", content: "one" },
    { role: "assistant", content: "two" },
    { role: "user", content: "three" },
  ]);
  await store.saveSummary(id, { fromSeq: 1, toSeq: 2, content: "the old session's start" });
  return id;
}

const STORES: [string, () => FullStore][] = [
  ["memory", () => createMemoryStore({ ttlMs: 0 })],
  ["sqlite", () => createSqliteStore({ path: join(dir, `${newSessionId()}.db`) })],
];

describe.each(STORES)("summaries copied into a session re-created meanwhile (%s)", (_, open) => {
  it("import refuses the summary instead of saving it into the new session", async () => {
    const source = createMemoryStore({ ttlMs: 0 });
    const id = await summarized(source);
    const lines = await exportAll(source);
    const target = open();
    try {
      const error = await importSessions(recreatedBeforeFirstSummary(target), () => lines).catch((e) => e);
      expect(isThreadkeepError(error, "session_not_found"), String(error)).toBe(true);
      expect(await target.listSummaries(id)).toEqual([]);
    } finally {
      await target.close();
    }
  });

  it("fork refuses the summary instead of saving it into the new session", async () => {
    const store = open();
    try {
      const id = await summarized(store);
      const memory = createMemory({ store: recreatedBeforeFirstSummary(store) });
      const forkId = newSessionId();
      const error = await memory.fork(id, { userId: "alice", id: forkId }).catch((e) => e);
      expect(isThreadkeepError(error, "session_not_found"), String(error)).toBe(true);
      expect(await store.listSummaries(forkId)).toEqual([]);
    } finally {
      await store.close();
    }
  });
});
