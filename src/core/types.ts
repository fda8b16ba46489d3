/**
 * The shared vocabulary of threadkeep, in one import: the {@link SessionStore} contract every backend
 * implements and its capabilities (`store-types.ts`); what it reads and writes (messages, sessions,
 * summaries, state, branches) in `session-types.ts`, its queries and options in `query-types.ts`,
 * embeddings in `vector-types.ts` and the turn lease in `lease-types.ts`.
 */
export * from "./store-types.js";
export * from "./session-types.js";
export * from "./query-types.js";
export * from "./vector-types.js";
export * from "./lease-types.js";
