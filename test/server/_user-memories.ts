/**
 * A store with user memories for the server tests of memories: the built-in store with a small
 * in-process {@link UserMemoryStore} beside it, so these tests need no particular backend's support.
 */
import { randomUUID } from "node:crypto";
import { ThreadkeepError } from "../../src/core/errors.js";
import type { UserMemory, UserMemoryStore } from "../../src/core/store-types.js";
import type { FullStore } from "../../src/core/types.js";
import { createMemoryStore } from "../../src/stores/memory.js";

/** `store` (default: a fresh in-memory store) with user memories added, unless it has them already. */
export function withUserMemories(store: FullStore = createMemoryStore()): FullStore & UserMemoryStore {
  if (typeof (store as Partial<UserMemoryStore>).addUserMemory === "function") return store as FullStore & UserMemoryStore;
  const rows = new Map<string, UserMemory>();
  const own = (userId: string, id: string) => {
    const row = rows.get(id);
    return row && row.userId === userId ? row : undefined;
  };
  const methods: UserMemoryStore = {
    async addUserMemory(input) {
      const now = input.createdAt ?? Date.now();
      const row: UserMemory = {
        id: input.id ?? randomUUID(),
        userId: input.userId,
        text: input.text,
        createdAt: now,
        updatedAt: now,
        source: input.source ?? { kind: "hand" },
        metadata: input.metadata ?? {},
        history: [],
      };
      rows.set(row.id, row);
      return structuredClone(row);
    },
    async getUserMemory(userId, id) {
      const row = own(userId, id);
      return row ? structuredClone(row) : null;
    },
    async listUserMemories(userId, options = {}) {
      const all = [...rows.values()].filter((m) => m.userId === userId).sort((a, b) => b.updatedAt - a.updatedAt);
      const start = Number(options.cursor ?? 0);
      const limit = options.limit ?? 50;
      const page = all.slice(start, start + limit);
      return { memories: structuredClone(page), nextCursor: start + limit < all.length ? String(start + limit) : null };
    },
    async updateUserMemory(userId, id, patch) {
      const row = own(userId, id);
      if (!row) throw new ThreadkeepError("not_found", `memory ${id} not found`);
      if (patch.text !== undefined && patch.text !== row.text) {
        row.history.push({ text: row.text, replacedAt: Date.now(), ...(patch.reason ? { reason: patch.reason } : {}) });
        row.text = patch.text;
      }
      if (patch.metadata) row.metadata = { ...row.metadata, ...patch.metadata };
      row.updatedAt = Math.max(Date.now(), row.updatedAt + 1);
      return structuredClone(row);
    },
    async deleteUserMemory(userId, id) {
      return own(userId, id) ? rows.delete(id) : false;
    },
    async deleteUserMemories(userId) {
      let n = 0;
      for (const [id, row] of rows) if (row.userId === userId && rows.delete(id)) n++;
      return n;
    },
  };
  return Object.assign(store, methods);
}

/** The memory methods of a store, to lay over a reopened store of the same data. */
export function pickMemoryMethods(store: UserMemoryStore): UserMemoryStore {
  const { addUserMemory, getUserMemory, listUserMemories, updateUserMemory, deleteUserMemory, deleteUserMemories } = store;
  return { addUserMemory, getUserMemory, listUserMemories, updateUserMemory, deleteUserMemory, deleteUserMemories };
}
