/**
 * threadkeep: session memory for LLM chat applications.
 * This entry imports no optional client: stores that need `postgres` or `redis` load them on use.
 */
export { createMemory, Memory, SessionHandle } from "./core/memory.js";
export type { BuildContextOptions, MemoryOptions, MemorySettings, OwnerOptions } from "./core/memory.js";
export * from "./core/types.js";
export * from "./core/errors.js";
export { isValidSessionId, MAX_SESSION_ID_LENGTH, newSessionId, parseSessionId, scopedSessionId } from "./core/ids.js";
export { contentText, toChatMessage, validateMessage, validateMessages } from "./core/messages.js";
export { DEFAULTS, parseDuration } from "./core/policies.js";
export type { AssembledContext, ContextInput, ContextPreferences } from "./core/context/types.js";
export { assembleContext } from "./core/context/assemble.js";
export { createStore, STORE_SCHEMES } from "./stores/url.js";
export type { StoreUrlOptions } from "./stores/url.js";
export { createMemoryStore } from "./stores/memory.js";
export type { MemoryStoreOptions } from "./stores/memory.js";
