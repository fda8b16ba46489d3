/**
 * GET /v1/users/me/export: the caller's own data as export JSONL — every session (messages, branches,
 * summaries, state) and memory (with history) of the caller, and nothing of another user's — on
 * SQLite, PostgreSQL and Redis; the file imports into an empty store as the same data.
 */
import { afterAll, describe, expect, it } from "vitest";
import type { FullStore } from "../../src/core/types.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { exportSessions } from "../../src/transfer/export.js";
import { importSessions } from "../../src/transfer/import.js";
import { storeKinds } from "../cli/_stores.js";
import { startStack } from "./_stack.js";

const kinds = (await storeKinds()).filter((k) => ["sqlite", "postgres", "redis"].includes(k.name));
afterAll(async () => {
  for (const k of kinds) await k.cleanup();
});

async function seed(store: FullStore, userId: string): Promise<string> {
  const { newSessionId } = await import("../../src/core/ids.js");
  const id = newSessionId();
  await store.createSession({ id, userId, metadata: { title: `${userId}'s` } });
  await store.appendMessages(id, [
    { role: "user", content: `${userId} asks` },
    { role: "assistant", content: "first answer" },
  ]);
  await store.replaceAfter(id, 1, [{ role: "assistant", content: "second answer" }], {
    branch: { reason: "regenerate" },
  });
  await store.setState(id, { owner: userId }, 0);
  await store.addUserMemory({ id: "shared-id", userId, text: `${userId} likes tea` });
  await store.updateUserMemory(userId, "shared-id", { text: `${userId} likes coffee`, reason: "edit" });
  return id;
}

describe.each(kinds.map((k) => [k.name, k] as const))("on %s", (_name, kind) => {
  it.skipIf(kind.enabled !== true)("streams exactly the caller's data, which imports as the same", async () => {
    const store = await kind.open();
    const alice = await seed(store, "alice");
    const bob = await seed(store, "bob");
    const stack = await startStack({ apiKeys: { "tk-alice": "alice", "tk-bob": "bob" }, store });
    try {
      const res = await stack.request("GET", "/v1/users/me/export", { headers: { authorization: "Bearer tk-alice" } });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
      expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename="threadkeep-export-/);
      const text = await res.text();
      expect(text).not.toContain("bob");
      expect(text).not.toContain(bob);
      const lines = text.trimEnd().split("\n");
      expect(lines.map((l) => JSON.parse(l).type)).toEqual([
        "threadkeep-export",
        "session",
        "message",
        "message",
        "state",
        "branch",
        "memory",
      ]);
      // The same as an operator's export of that user, and a complete file: it imports as the same data.
      const expected: string[] = [];
      await exportSessions(store, { userId: "alice" }, (l) => void expected.push(l));
      expect(lines).toEqual(expected);
      expect(lines[1]).toContain(alice);
      const copy = createMemoryStore({ ttlMs: 0 });
      const report = await importSessions(copy, () => lines);
      expect(report.problems).toEqual([]);
      const memories = (await copy.listUserMemories("alice")).memories;
      expect(memories).toEqual((await store.listUserMemories("alice")).memories);
      expect(memories[0].history).toEqual([expect.objectContaining({ text: "alice likes tea", reason: "edit" })]);
      expect((await copy.listUserMemories("bob")).memories).toEqual([]);
      // Unauthenticated: no data at all.
      expect((await stack.request("GET", "/v1/users/me/export")).status).toBe(401);
    } finally {
      await stack.close();
      await store.close();
    }
  });
});

// Bounded memory, checked without measuring a heap (bench/user-export.ts measures it at 100,000
// messages): the route reads a long session's messages a page at a time, never all at once.
it("reads a long history in pages of messages", async () => {
  const { READ_PAGE } = await import("../../src/transfer/session-copy.js");
  const { newSessionId } = await import("../../src/core/ids.js");
  const store = createMemoryStore({ ttlMs: 0 });
  const id = newSessionId();
  const count = READ_PAGE * 2 + 7;
  await store.createSession({ id, userId: "alice" });
  await store.appendMessages(
    id,
    Array.from({ length: count }, (_, i) => ({ role: "user" as const, content: `m${i}` })),
  );
  const reads: (number | undefined)[] = [];
  const getMessages = store.getMessages.bind(store);
  store.getMessages = (sessionId, options) => {
    reads.push(options?.limit);
    return getMessages(sessionId, options);
  };
  const stack = await startStack({ apiKeys: { "tk-alice": "alice" }, store });
  try {
    const res = await stack.request("GET", "/v1/users/me/export", { headers: { authorization: "Bearer tk-alice" } });
    const lines = (await res.text()).trimEnd().split("\n");
    expect(lines.filter((l) => JSON.parse(l).type === "message")).toHaveLength(count);
    expect(reads).toEqual([READ_PAGE, READ_PAGE, READ_PAGE]);
  } finally {
    await stack.close();
  }
});
