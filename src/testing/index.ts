/**
 * `threadkeep/testing`: the store conformance suite, so that a store written outside threadkeep
 * (MongoDB, DynamoDB, …) proves it keeps the {@link SessionStore} contract with a few lines of vitest.
 * vitest is an optional peer dependency needed by this subpath only.
 */
export { expectCode, runStoreConformance } from "./conformance.js";
export type { ConformanceOptions, OpenStore } from "./conformance.js";
export type { OpenStoreWithTtl } from "./conformance-expiry.js";
export type { SessionStore } from "../core/types.js";
