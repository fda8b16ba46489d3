/** Fixtures and assertions shared by the sections of the store conformance suite. */
import { randomUUID } from "node:crypto";
import { expect } from "vitest";
import { type ErrorCode, isThreadkeepError } from "../core/errors.js";
import { newSessionId } from "../core/ids.js";
import type { MessageInput, SessionStore } from "../core/types.js";

/**
 * Opens the store under test. Called more than once where a second "process" or a reopen is needed:
 * a persistent store must open the same data each time.
 */
export type OpenStore = () => Promise<SessionStore> | SessionStore;

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
export function sessionMaker(store: () => SessionStore) {
  return (userId = user(), extra: { lastActivityAt?: number } = {}) =>
    store().createSession({ id: newSessionId(), userId, ...extra });
}
