/**
 * What every store does the same way with memories about users ({@link UserMemory}): a new memory from
 * its input, an update that keeps the old text in the history, the listing order and its cursor. The
 * built-in stores share them, so a memory reads alike on every backend.
 */
import { randomUUID } from "node:crypto";
import { ThreadkeepError } from "../errors.js";
import type {
  ListOptions,
  UserIdPage,
  UserMemory,
  UserMemoryInput,
  UserMemoryPage,
  UserMemoryPatch,
} from "../types.js";

/** Default page size of memory listings. */
export const DEFAULT_MEMORY_LIST_LIMIT = 50;

/** The memory a store keeps for `input`: an id made when none is given, times defaulting to now. */
export function memoryFromInput(input: UserMemoryInput, now = Date.now()): UserMemory {
  const createdAt = input.createdAt ?? now;
  return {
    id: input.id ?? randomUUID(),
    userId: input.userId,
    text: input.text,
    createdAt,
    updatedAt: input.updatedAt ?? createdAt,
    source: structuredClone(input.source ?? { kind: "hand" }),
    metadata: structuredClone(input.metadata ?? {}),
    history: structuredClone(input.history ?? []),
  };
}

/** `memory` after `patch` (a new object): a changed text moves the old one into the history. */
export function applyMemoryPatch(memory: UserMemory, patch: UserMemoryPatch, now = Date.now()): UserMemory {
  const next = structuredClone(memory);
  if (patch.text !== undefined && patch.text !== memory.text) {
    next.history.push({ text: memory.text, replacedAt: now, ...(patch.reason ? { reason: patch.reason } : {}) });
    next.text = patch.text;
  }
  if (patch.metadata) next.metadata = { ...next.metadata, ...structuredClone(patch.metadata) };
  next.updatedAt = Math.max(now, memory.updatedAt);
  return next;
}

/** Orders memories most recently updated first, ties by id descending (the listing order). */
export function compareMemories(
  a: Pick<UserMemory, "updatedAt" | "id">,
  b: Pick<UserMemory, "updatedAt" | "id">,
): number {
  if (a.updatedAt !== b.updatedAt) return b.updatedAt - a.updatedAt;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/** Encodes a memory listing cursor: the position after the last memory shown. */
export function encodeMemoryCursor(memory: Pick<UserMemory, "updatedAt" | "id">): string {
  return Buffer.from(`${memory.updatedAt}:${memory.id}`).toString("base64url");
}

/** Decodes a memory listing cursor. @throws `invalid_request` for a cursor threadkeep did not make. */
export function decodeMemoryCursor(cursor: string): { updatedAt: number; id: string } {
  const text = Buffer.from(cursor, "base64url").toString();
  const colon = text.indexOf(":");
  const updatedAt = Number(text.slice(0, colon));
  const id = text.slice(colon + 1);
  if (colon < 1 || !Number.isSafeInteger(updatedAt) || id.length === 0) {
    throw new ThreadkeepError("invalid_request", "Invalid cursor");
  }
  return { updatedAt, id };
}

/** The listing's page size. @throws `invalid_request` for one that is not a positive integer. */
export function memoryPageLimit(options: ListOptions = {}): number {
  const limit = options.limit ?? DEFAULT_MEMORY_LIST_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 1)
    throw new ThreadkeepError("invalid_request", `limit must be a positive integer, got ${limit}`);
  return limit;
}

/** One user's page of memories in listing order (copies), for stores that hold them in memory. */
export function pageUserMemories(memories: Iterable<UserMemory>, options: ListOptions = {}): UserMemoryPage {
  const limit = memoryPageLimit(options);
  const cursor = options.cursor ? decodeMemoryCursor(options.cursor) : null;
  const after = [...memories].filter((m) => !cursor || compareMemories(m, cursor) > 0).sort(compareMemories);
  const page = after.slice(0, limit).map((m) => structuredClone(m));
  const last = page.at(-1);
  return { memories: page, nextCursor: after.length > limit && last ? encodeMemoryCursor(last) : null };
}

/** A page of stored rows, `limit + 1` read to know whether another page follows. */
export function memoryPageOf(rows: UserMemory[], limit: number): UserMemoryPage {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { memories: page, nextCursor: rows.length > limit && last ? encodeMemoryCursor(last) : null };
}

/** One page of user ids (ascending, cursor after the last shown), for stores that hold them in memory. */
export function pageUserIds(userIds: Iterable<string>, options: ListOptions = {}): UserIdPage {
  const limit = memoryPageLimit(options);
  const after = options.cursor ? decodeUserIdCursor(options.cursor) : null;
  const sorted = [...new Set(userIds)].filter((u) => after === null || u > after).sort();
  const page = sorted.slice(0, limit);
  return { userIds: page, nextCursor: sorted.length > limit ? encodeUserIdCursor(page[page.length - 1]) : null };
}

/** Encodes a user id listing cursor: the last id shown. */
export function encodeUserIdCursor(userId: string): string {
  return Buffer.from(userId).toString("base64url");
}

/** Decodes a user id listing cursor. @throws `invalid_request` for an empty one. */
export function decodeUserIdCursor(cursor: string): string {
  const userId = Buffer.from(cursor, "base64url").toString();
  if (userId.length === 0) throw new ThreadkeepError("invalid_request", "Invalid cursor");
  return userId;
}
