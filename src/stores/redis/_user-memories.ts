/**
 * The Redis store's memories about users. Two keys a user, under one hash tag made of the user id's
 * hash (so one user's memories live in one Cluster slot, whatever characters the id holds):
 * `<prefix>m:{<hash>}:data`, a hash of memory id → the memory's JSON (with its history), and
 * `<prefix>m:{<hash>}:order`, a sorted set of ids scored by `updatedAt` (the listing order; ties by id,
 * as Redis orders equal scores). Memories have no TTL: they outlive the sessions they came from.
 * Their embeddings are a third key, `<prefix>m:{<hash>}:vec`, a hash of memory id → `{ model, text,
 * vector }` (the text it was made from: a vector of an older text is not read), deleted with the memory.
 * `<prefix>m:owners`, a sorted set of the user ids with memories (all scored 0, ordered by id), is what
 * export and migration enumerate: added to before a user's first memory (in another Cluster slot, so
 * not in the same step: a failure in between lists a user with no memories, never the reverse).
 * Memories written before that set existed are found once, before the first listing of owners: a walk
 * of the memory keys (SCAN on every master, a batch at a time) adds their owners, and
 * `<prefix>m:owners:complete` records that it ran, so no later process walks again.
 */
import { createHash } from "node:crypto";
import { ThreadkeepError } from "../../core/errors.js";
import {
  applyMemoryPatch,
  decodeMemoryCursor,
  decodeUserIdCursor,
  encodeUserIdCursor,
  memoryFromInput,
  memoryPageLimit,
  memoryPageOf,
} from "../../core/user-memories/store-helpers.js";
import type {
  FullStore,
  MemoryOwnersStore,
  UserMemory,
  UserMemoryStore,
  UserMemoryVectorStore,
} from "../../core/types.js";
import {
  memoryVectorsToKeep,
  missingMemoryVectors,
  packVector,
  scanMemoryVectors,
  type StoredMemoryVector,
  unpackVector,
} from "../_vectors.js";
import type { RedisConnection } from "./_connection.js";
import { script } from "./_scripts.js";

/** Stores a new memory unless its id is taken. KEYS data, order; ARGV id, json, updatedAt. */
const ADD = script(
  "memory-add",
  `if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
   redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
   return 1`,
);

/** Replaces a memory only if it is still as read (compare and set). KEYS data, order; ARGV id, old json, new json, updatedAt. */
const REPLACE = script(
  "memory-replace",
  `if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
   redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
   redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
   return 1`,
);

/**
 * A page after a cursor: ids of the cursor's score below its id (descending), then lower scores.
 * KEYS data, order; ARGV updatedAt, id, count. @returns the memories' JSON in listing order.
 */
const PAGE_AFTER = script(
  "memory-page",
  `local count = tonumber(ARGV[3])
   local ids = {}
   local tied = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[1], ARGV[1])
   for i = #tied, 1, -1 do
     if tied[i] < ARGV[2] and #ids < count then ids[#ids + 1] = tied[i] end
   end
   if #ids < count then
     local rest = redis.call('ZREVRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '-inf', 'LIMIT', 0, count - #ids)
     for _, id in ipairs(rest) do ids[#ids + 1] = id end
   end
   if #ids == 0 then return {} end
   return redis.call('HMGET', KEYS[1], unpack(ids))`,
  { readOnly: true },
);

/** The first page. KEYS data, order; ARGV count. */
const PAGE_FIRST = script(
  "memory-first",
  `local ids = redis.call('ZREVRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1)
   if #ids == 0 then return {} end
   return redis.call('HMGET', KEYS[1], unpack(ids))`,
  { readOnly: true },
);

/** Stores embeddings of memories that exist. KEYS data, vec; ARGV id, json, id, json, … */
const PUT_VECTORS = script(
  "memory-vectors-put",
  `for i = 1, #ARGV, 2 do
     if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
   end
   return 1`,
);

/** Keys per SCAN round trip and memories per HSCAN round trip of the owners' backfill. */
const BACKFILL_BATCH = 500;

const notFound = (id: string) => new ThreadkeepError("not_found", `Memory ${id} not found`);

/** The memory methods of the Redis store. */
export function redisUserMemories(
  db: RedisConnection,
  prefix: string,
): Pick<FullStore, keyof UserMemoryStore | keyof MemoryOwnersStore> & UserMemoryVectorStore {
  const keysOf = (userId: string) => {
    const tag = createHash("sha256").update(userId).digest("hex").slice(0, 32);
    return [`${prefix}m:{${tag}}:data`, `${prefix}m:{${tag}}:order`, `${prefix}m:{${tag}}:vec`];
  };
  /** The user's memories and their vectors, read in one round trip. */
  const withVectors = async (userId: string) => {
    const [data, , vec] = keysOf(userId);
    const [fields, vectorFields] = await db.transaction<[string[], string[]]>([
      ["HGETALL", data],
      ["HGETALL", vec],
    ]);
    const memories: UserMemory[] = [];
    for (let i = 1; i < fields.length; i += 2) {
      const memory = parse(userId, fields[i]);
      if (memory) memories.push(memory);
    }
    const vectors = new Map<string, StoredMemoryVector>();
    for (let i = 1; i < vectorFields.length; i += 2) {
      const v = JSON.parse(vectorFields[i]) as { model: string; text: string; vector: string };
      vectors.set(vectorFields[i - 1], {
        model: v.model,
        text: v.text,
        vector: unpackVector(Buffer.from(v.vector, "base64")),
      });
    }
    return { memories, vectors };
  };
  /** A stored memory, if it is this user's (a hash shared by two users never shows one the other's). */
  const parse = (userId: string, json: string | null): UserMemory | null => {
    if (json === null) return null;
    let memory: UserMemory;
    try {
      memory = JSON.parse(json) as UserMemory;
    } catch (error) {
      throw new ThreadkeepError("store_corrupt", "Unreadable memory in the redis store", { cause: error });
    }
    return memory.userId === userId ? memory : null;
  };
  const page = (userId: string, replies: (string | null)[], limit: number) =>
    memoryPageOf(
      replies.map((json) => parse(userId, json)).filter((m): m is UserMemory => m !== null),
      limit,
    );

  const owners = `${prefix}m:owners`;
  const ownersComplete = `${prefix}m:owners:complete`;
  /** Adds to the owners set the owner of every stored memory (those of releases before the set, 0.x). */
  const backfillOwners = async () => {
    if ((await db.send<number>(["EXISTS", ownersComplete])) === 1) return;
    // Glob characters of the prefix match only themselves; the exact shape is checked below.
    const pattern = `${prefix.replace(/[*?[\]\\]/g, "\\$&")}m:{*}:data`;
    const shape = /^m:\{[0-9a-f]{32}\}:data$/;
    for await (const keys of db.scan(pattern, BACKFILL_BATCH)) {
      for (const key of keys) {
        if (!key.startsWith(prefix) || !shape.test(key.slice(prefix.length))) continue;
        // The data hash's memories name their owner (two users share a hash only if their ids' hashes collide).
        const found = new Set<string>();
        let cursor = "0";
        do {
          const [next, fields] = await db.send<[string, string[]]>([
            "HSCAN",
            key,
            cursor,
            "COUNT",
            String(BACKFILL_BATCH),
          ]);
          cursor = next;
          for (let i = 1; i < fields.length; i += 2) {
            let memory: Partial<UserMemory>;
            try {
              memory = JSON.parse(fields[i]) as Partial<UserMemory>;
            } catch (error) {
              // Skipping it would leave its owner out of every export without a word.
              throw new ThreadkeepError("store_corrupt", `Unreadable memory in the redis store (${key})`, {
                cause: error,
              });
            }
            if (typeof memory.userId === "string") found.add(memory.userId);
          }
        } while (cursor !== "0");
        if (found.size > 0) await db.send(["ZADD", owners, ...[...found].flatMap((userId) => ["0", userId])]);
      }
    }
    await db.send(["SET", ownersComplete, String(Date.now())]);
  };
  /** The backfill, once a store (again after a failure). */
  let backfilled: Promise<void> | undefined;
  const ownersListed = () => {
    backfilled ??= backfillOwners().catch((error: unknown) => {
      backfilled = undefined;
      throw error;
    });
    return backfilled;
  };
  return {
    async addUserMemory(input) {
      const memory = memoryFromInput(input);
      await db.send(["ZADD", owners, "0", input.userId]);
      const added = await db.eval<number>(ADD, keysOf(input.userId), [
        memory.id,
        JSON.stringify(memory),
        String(memory.updatedAt),
      ]);
      if (added !== 1) throw new ThreadkeepError("invalid_request", `Memory ${memory.id} already exists`);
      return memory;
    },

    async listMemoryOwners(options = {}) {
      const limit = memoryPageLimit(options);
      await ownersListed();
      const from = options.cursor ? `(${decodeUserIdCursor(options.cursor)}` : "-";
      const userIds = await db.send<string[]>(["ZRANGEBYLEX", owners, from, "+", "LIMIT", "0", String(limit + 1)]);
      const page = userIds.slice(0, limit);
      return { userIds: page, nextCursor: userIds.length > limit ? encodeUserIdCursor(page[page.length - 1]) : null };
    },

    async getUserMemory(userId, id) {
      return parse(userId, await db.send<string | null>(["HGET", keysOf(userId)[0], id]));
    },

    async listUserMemories(userId, options = {}) {
      const limit = memoryPageLimit(options);
      const cursor = options.cursor ? decodeMemoryCursor(options.cursor) : null;
      const replies = cursor
        ? await db.eval<(string | null)[]>(PAGE_AFTER, keysOf(userId), [
            String(cursor.updatedAt),
            cursor.id,
            String(limit + 1),
          ])
        : await db.eval<(string | null)[]>(PAGE_FIRST, keysOf(userId), [String(limit + 1)]);
      return page(userId, replies, limit);
    },

    async updateUserMemory(userId, id, patch) {
      const keys = keysOf(userId);
      // Compare and set: a concurrent change makes this one read again and apply on top of it.
      for (let attempt = 0; attempt < 20; attempt++) {
        const json = await db.send<string | null>(["HGET", keys[0], id]);
        const memory = parse(userId, json);
        if (!memory) throw notFound(id);
        const next = applyMemoryPatch(memory, patch);
        if ((await db.eval<number>(REPLACE, keys, [id, json!, JSON.stringify(next), String(next.updatedAt)])) === 1)
          return next;
      }
      throw new ThreadkeepError("store_unavailable", `Memory ${id} kept changing under an update; try again`);
    },

    async deleteUserMemory(userId, id) {
      const [data, order, vec] = keysOf(userId);
      if (!(await this.getUserMemory(userId, id))) return false;
      const [removed] = await db.transaction<[number, number, number]>([
        ["HDEL", data, id],
        ["ZREM", order, id],
        ["HDEL", vec, id],
      ]);
      return removed > 0;
    },

    async deleteUserMemories(userId) {
      const [data, order, vec] = keysOf(userId);
      const [count] = await db.transaction<[number, number]>([
        ["HLEN", data],
        ["DEL", data, order, vec],
      ]);
      await db.send(["ZREM", owners, userId]);
      return count;
    },

    async putUserMemoryEmbeddings(userId, model, items) {
      if (items.length === 0) return;
      const { vectors } = await withVectors(userId);
      const keep = memoryVectorsToKeep(model, items, vectors.values());
      const [data, , vec] = keysOf(userId);
      const args = [...keep].flatMap(([id, v]) => [
        id,
        JSON.stringify({ model, text: v.text, vector: packVector(v.vector).toString("base64") }),
      ]);
      await db.eval(PUT_VECTORS, [data, vec], args);
    },

    async missingUserMemoryEmbeddings(userId, model, limit = 100) {
      const { memories, vectors } = await withVectors(userId);
      return missingMemoryVectors(memories, (id) => vectors.get(id), model, limit);
    },

    async searchUserMemoryVectors(query) {
      const { memories, vectors } = await withVectors(query.userId);
      return scanMemoryVectors(memories, (id) => vectors.get(id), query);
    },
  };
}
