/** Fixtures and assertions shared by the sections of the store conformance suite. */
import { randomUUID } from "node:crypto";
import { expect } from "vitest";
import { type ErrorCode, isThreadkeepError } from "../core/errors.js";
import { newSessionId } from "../core/ids.js";
import { storeBehind } from "../core/store/complete.js";
import {
  type FullStore,
  hasBranches,
  hasCounts,
  hasMemoryOwners,
  hasRetention,
  hasSearch,
  hasState,
  hasSummaries,
  hasUserMemories,
  type MessageInput,
  type SessionStore,
} from "../core/types.js";

/**
 * Opens the store under test. Called more than once where a second "process" or a reopen is needed:
 * a persistent store must open the same data each time.
 */
export type OpenStore = () => Promise<SessionStore> | SessionStore;

/** What a test may need of the store beyond the required contract. */
export type Needed =
  | "branches"
  | "summaries"
  | "state"
  | "search"
  | "retention"
  | "counts"
  | "idempotentWrites"
  | "ownerScope"
  | "guardedAppends"
  | "userMemories"
  | "memoryOwners";

/** Whether the store under test implements `need` itself (the suite runs it through `completeStore`). */
export function implementsNatively(store: FullStore, need: Needed): boolean {
  const native = storeBehind(store);
  switch (need) {
    case "branches":
      return hasBranches(native);
    case "summaries":
      return hasSummaries(native);
    case "state":
      return hasState(native);
    case "search":
      return hasSearch(native);
    case "retention":
      return hasRetention(native);
    case "counts":
      return hasCounts(native);
    case "userMemories":
      return hasUserMemories(native);
    case "memoryOwners":
      return hasMemoryOwners(native);
    default:
      return native.capabilities[need] === true;
  }
}

/** Skips the running test, saying why, unless the store implements every one of `needs` itself. */
export function requireNative(ctx: { skip: (reason: string) => void }, store: FullStore, ...needs: Needed[]): void {
  const missing = needs.filter((need) => !implementsNatively(store, need));
  if (missing.length > 0) ctx.skip(`${store.name} does not implement ${missing.join(", ")} (an optional capability)`);
}

/** Asserts that `promise` rejects with a ThreadkeepError of `code`. */
export async function expectCode(promise: Promise<unknown>, code: ErrorCode): Promise<void> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  expect(caught, `expected a ${code} error`).toBeDefined();
  expect(isThreadkeepError(caught) ? caught.code : caught).toBe(code);
}

/** A fresh owner id, so tests on a shared server need no cleanup. */
export const user = () => `user-${randomUUID()}`;
/** A user message with `content`. */
export const text = (content: string): MessageInput => ({ role: "user", content });
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Creates sessions with random ids in the suite's open store. */
export function sessionMaker(store: () => FullStore) {
  return (userId = user(), extra: { lastActivityAt?: number } = {}) =>
    store().createSession({ id: newSessionId(), userId, ...extra });
}
