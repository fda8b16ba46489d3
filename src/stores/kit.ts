/**
 * Building blocks for a store of your own (docs/custom-store.md): the in-process turn lease with
 * fences, and the message query and session paging rules every built-in store applies the same way.
 */
export { LocalLeases } from "./_lease.js";
export { applyMessageQuery, pageOwnerSessions, sessionFromInput, stampMessages } from "./_util.js";
export { applyMemoryPatch, compareMemories, decodeMemoryCursor, encodeMemoryCursor, memoryFromInput, pageUserMemories } from "../core/user-memories/store-helpers.js";
