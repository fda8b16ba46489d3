/**
 * The copy paths (import, migrate, fork) append messages only into the session they copy to: one
 * deleted and created again under its id while the copy runs refuses its later batches
 * (`session_not_found`), as the summaries they copy are refused (copy-summary-guard.test.ts), instead
 * of giving the new session the rest of the old one's messages.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { importSessions } from "../../src/transfer/import.js";
import { migrateStores } from "../../src/transfer/migrate.js";
import { isThreadkeepError } from "../../src/core/errors.js";
import { newSessionId } from "../../src/core/ids.js";
import { createMemory } from "../../src/create-memory.js";
import type { FullStore } from "../../src/core/types.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { exportAll } from "./_seed.js";

const dir = mkdtempSync(join(tmpdir(), "tk-append-guard-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** More messages than one batch of any copy path (import and migrate: 250, fork: 100). */
const COPIED = 300;

/** `store`, except that its first append is followed by the session being deleted and created again. */
function recreatedAfterFirstAppend(store: FullStore): FullStore {
  let done = false;
  return new Proxy(store, {
    get(target, name, receiver) {
      if (name !== "appendMessages") return Reflect.get(target, name, receiver);
      return async (...args: Parameters<FullStore["appendMessages"]>) => {
        const added = await target.appendMessages(...args);
        if (!done) {
          done = true;
          const [id] = args;
          const old = (await target.getSession(id))!;
          await target.deleteSession(id);
          await target.createSession({ id, userId: old.userId, createdAt: old.createdAt + 1 });
        }
        return added;
      };
    },
  });
}

/** A session of {@link COPIED} messages. */
async function longSession(store: FullStore): Promise<string> {
  const id = newSessionId();
  await store.createSession({ id, userId: "alice" });
  await store.appendMessages(
    id,
    Array.from({ length: COPIED }, (_, i) => ({ role: "user" as const, content: `message ${i}` })),
  );
  return id;
}

/** A store that cannot guard appends: the copies read the session again before each batch. */
const unguarded = (store: FullStore): FullStore =>
  new Proxy(store, {
    get: (target, name, receiver) =>
      name === "capabilities" ? { ...target.capabilities, guardedAppends: false } : Reflect.get(target, name, receiver),
  });

const STORES: [string, () => FullStore][] = [
  ["memory", () => createMemoryStore({ ttlMs: 0 })],
  ["sqlite", () => createSqliteStore({ path: join(dir, `${newSessionId()}.db`) })],
  ["memory without guardedAppends", () => unguarded(createMemoryStore({ ttlMs: 0 }))],
];

const refused = (error: unknown) => expect(isThreadkeepError(error, "session_not_found"), String(error)).toBe(true);

describe.each(STORES)("messages copied into a session re-created meanwhile (%s)", (_, open) => {
  it("import refuses the later batches instead of appending them to the new session", async () => {
    const source = createMemoryStore({ ttlMs: 0 });
    const id = await longSession(source);
    const lines = await exportAll(source);
    const target = open();
    try {
      refused(await importSessions(recreatedAfterFirstAppend(target), () => lines).catch((e) => e));
      expect(await target.countMessages(id)).toBe(0);
    } finally {
      await target.close();
    }
  });

  it("migrate refuses the later batches instead of appending them to the new session", async () => {
    const source = createMemoryStore({ ttlMs: 0 });
    const id = await longSession(source);
    const target = open();
    try {
      refused(await migrateStores(source, recreatedAfterFirstAppend(target), { verify: false }).catch((e) => e));
      expect(await target.countMessages(id)).toBe(0);
    } finally {
      await target.close();
    }
  });

  it("fork refuses the later batches instead of appending them to the new session", async () => {
    const store = open();
    try {
      const id = await longSession(store);
      const memory = createMemory({ store: recreatedAfterFirstAppend(store) });
      const forkId = newSessionId();
      refused(await memory.fork(id, { userId: "alice", id: forkId }).catch((e) => e));
      expect(await store.countMessages(forkId)).toBe(0);
      expect(await store.countMessages(id)).toBe(COPIED);
    } finally {
      await store.close();
    }
  });
});
