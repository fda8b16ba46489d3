/**
 * The in-process store's memories about users: by user then id, outliving sessions (and the session
 * TTL). A memory's vector hangs off the memory as stored, so a deleted memory (or an erased user)
 * takes it along.
 */
import { ThreadkeepError } from "../../core/errors.js";
import type { MemoryOwnersStore, UserMemory, UserMemoryStore, UserMemoryVectorStore } from "../../core/types.js";
import {
  applyMemoryPatch,
  memoryFromInput,
  pageUserIds,
  pageUserMemories,
} from "../../core/user-memories/store-helpers.js";
import { memoryVectorsToKeep, missingMemoryVectors, scanMemoryVectors, type StoredMemoryVector } from "../_vectors.js";

type UserMemoryMethods = UserMemoryStore & MemoryOwnersStore & UserMemoryVectorStore;

/** The user memory methods of an in-process store, and `clear` for its close; `ensureOpen` throws once it is closed. */
export function inProcessUserMemories(ensureOpen: () => void): { methods: UserMemoryMethods; clear(): void } {
  const memories = new Map<string, Map<string, UserMemory>>();
  const memoryVectors = new WeakMap<UserMemory, StoredMemoryVector>();
  return {
    clear: () => memories.clear(),
    methods: {
      async addUserMemory(input) {
        ensureOpen();
        const memory = memoryFromInput(input);
        const mine = memories.get(input.userId) ?? new Map<string, UserMemory>();
        if (mine.has(memory.id)) throw new ThreadkeepError("invalid_request", `Memory ${memory.id} already exists`);
        mine.set(memory.id, memory);
        memories.set(input.userId, mine);
        return structuredClone(memory);
      },

      async listMemoryOwners(options) {
        ensureOpen();
        return pageUserIds(
          [...memories].filter(([, mine]) => mine.size > 0).map(([userId]) => userId),
          options,
        );
      },

      async getUserMemory(userId, id) {
        ensureOpen();
        const memory = memories.get(userId)?.get(id);
        return memory ? structuredClone(memory) : null;
      },

      async listUserMemories(userId, options) {
        ensureOpen();
        return pageUserMemories(memories.get(userId)?.values() ?? [], options);
      },

      async updateUserMemory(userId, id, patch) {
        ensureOpen();
        const mine = memories.get(userId);
        const memory = mine?.get(id);
        if (!mine || !memory) throw new ThreadkeepError("not_found", `Memory ${id} not found`);
        const next = applyMemoryPatch(memory, patch);
        const vector = memoryVectors.get(memory);
        if (vector && vector.text === next.text) memoryVectors.set(next, vector);
        mine.set(id, next);
        return structuredClone(next);
      },

      async putUserMemoryEmbeddings(userId, model, items) {
        ensureOpen();
        const mine = memories.get(userId);
        const keep = memoryVectorsToKeep(
          model,
          items,
          [...(mine?.values() ?? [])].map((m) => memoryVectors.get(m)),
        );
        for (const [id, vector] of keep) {
          const memory = mine?.get(id);
          if (memory && memory.text === vector.text) memoryVectors.set(memory, vector);
        }
      },

      async missingUserMemoryEmbeddings(userId, model, limit = 100) {
        ensureOpen();
        const mine = memories.get(userId);
        return missingMemoryVectors(mine?.values() ?? [], (id) => memoryVectors.get(mine!.get(id)!), model, limit);
      },

      async searchUserMemoryVectors(query) {
        ensureOpen();
        const mine = memories.get(query.userId);
        return scanMemoryVectors(mine?.values() ?? [], (id) => memoryVectors.get(mine!.get(id)!), query);
      },

      async deleteUserMemory(userId, id) {
        ensureOpen();
        return memories.get(userId)?.delete(id) ?? false;
      },

      async deleteUserMemories(userId) {
        ensureOpen();
        const count = memories.get(userId)?.size ?? 0;
        memories.delete(userId);
        return count;
      },
    },
  };
}
