/**
 * `threadkeep/testing`: the store conformance suite, so that a store written outside threadkeep
 * (MongoDB, DynamoDB, …) proves it keeps the {@link FullStore} contract with a few lines of vitest.
 * vitest is an optional peer dependency needed by this subpath only.
 */
export { runStoreConformance } from "./conformance.js";
export type { ConformanceOptions } from "./conformance.js";
export { expectCode } from "./_conformance-fixtures.js";
export type { OpenStore } from "./_conformance-fixtures.js";
export type { OpenStoreWithTtl } from "./conformance-expiry.js";
export type { FullStore, SessionStore } from "../core/types.js";
