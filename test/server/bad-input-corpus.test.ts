/**
 * Issue 9's acceptance corpus: well over a thousand generated bad requests (fixed seed) over every
 * documented route, on the in-memory and the SQLite store. None may be a 5xx; a refused request
 * stores nothing (a fresh session stays absent, an existing one unchanged); /healthz answers after.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { FullStore } from "../../src/core/types.js";
import { type BadCase, buildCorpus } from "./_bad-input.js";
import { type Stack, startStack } from "./_stack.js";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function snapshot(store: FullStore, id: string): Promise<string> {
  const [session, count, state] = await Promise.all([
    store.getSession(id),
    store.countMessages(id),
    store.getState(id),
  ]);
  return JSON.stringify({ metadata: session?.metadata, count, state });
}

async function send(stack: Stack, c: BadCase): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = { ...c.headers };
  if (c.body !== undefined) headers["content-type"] = c.contentType ?? "application/json";
  const res = await fetch(`${stack.url}${c.path}`, { method: c.method, headers, body: c.body });
  return { status: res.status, text: await res.text() };
}

// The whole corpus on the in-memory store; every third case on SQLite (every route still), to stay
// well under a minute on a CI machine.
const stores: { name: string; every: number; store: () => string | undefined }[] = [
  { name: "memory", every: 1, store: () => undefined },
  {
    name: "sqlite",
    every: 3,
    store: () => {
      const dir = mkdtempSync(join(tmpdir(), "tk-corpus-"));
      dirs.push(dir);
      return `sqlite:${join(dir, "corpus.db")}`;
    },
  },
];

describe.each(stores)("bad-input corpus on the $name store", ({ store, every }) => {
  it("answers every case with a 4xx (or a success), never a 5xx, and stores nothing it refused", async () => {
    const stack = await startStack({ store: store() });
    try {
      const existing = randomUUID();
      await stack.memory.addMessages(existing, [
        { role: "user", content: "hi there" },
        { role: "assistant", content: "hello" },
      ]);
      const backing = await stack.memory.store();
      const corpus = buildCorpus(existing, () => randomUUID()).filter((_, i) => i % every === 0);
      expect(corpus.length).toBeGreaterThanOrEqual(every === 1 ? 1000 : 500);

      const serverErrors: string[] = [];
      const leftovers: string[] = [];
      const statuses = new Map<number, number>();
      let before = await snapshot(backing, existing);
      for (const c of corpus) {
        const { status, text } = await send(stack, c);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status >= 500) serverErrors.push(`${c.name}: ${status} ${text.slice(0, 200)}`);
        if (status >= 400 && c.path.startsWith("/v1/")) {
          const code = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code;
          if (typeof code !== "string")
            serverErrors.push(`${c.name}: ${status} without an error code: ${text.slice(0, 200)}`);
        }
        const id = c.fresh
          ? /[0-9a-f-]{36}/.exec(`${c.path} ${c.body ?? ""} ${c.headers?.["x-session-id"] ?? ""}`)?.[0]
          : undefined;
        if (status >= 400 && id && id !== existing && (await backing.getSession(id)))
          leftovers.push(`${c.name}: session ${id} left behind`);
        const after = await snapshot(backing, existing);
        if (status >= 400 && after !== before) leftovers.push(`${c.name}: changed the existing session`);
        before = after;
      }
      expect(serverErrors).toEqual([]);
      expect(leftovers).toEqual([]);
      expect((await fetch(`${stack.url}/healthz`)).status).toBe(200);
      // Mostly refusals: the corpus is bad input, not a set of lucky successes.
      const refused = [...statuses].filter(([s]) => s >= 400).reduce((sum, [, n]) => sum + n, 0);
      expect(refused / corpus.length).toBeGreaterThan(0.6);
    } finally {
      await stack.close();
    }
  }, 120_000);
});
