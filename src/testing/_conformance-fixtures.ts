/** Fixtures shared by the sections of the store conformance suite. */
import { randomUUID } from "node:crypto";
import { newSessionId } from "../core/ids.js";
import type { MessageInput, SessionStore } from "../core/types.js";

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
