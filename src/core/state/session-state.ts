import { readPreferences } from "../context/preferences.js";
import type { ContextPreferences } from "../context/types.js";
import { isThreadkeepError } from "../errors.js";
import type { SessionState, FullStore } from "../types.js";
import {
  type ConversationState,
  isExpired,
  type PendingConfirmation,
  readConversation,
  writeConversation,
} from "./conversation.js";

/** A session whose state may be changed: ownership already checked by the caller. */
export interface StateAccess {
  store: FullStore;
  sessionId: string;
}

const MAX_ATTEMPTS = 20;

/**
 * Changes state data by compare-and-set, calling `change` again on fresh data after a concurrent
 * write. `change` returns null to write nothing.
 */
export async function modifyState(
  access: StateAccess,
  change: (data: Record<string, unknown>) => Record<string, unknown> | null,
): Promise<SessionState> {
  for (let attempt = 1; ; attempt++) {
    const current = await access.store.getState(access.sessionId);
    const next = change(structuredClone(current.data));
    if (next === null) return current;
    try {
      return await access.store.setState(access.sessionId, next, current.version);
    } catch (error) {
      if (!isThreadkeepError(error, "state_conflict") || attempt >= MAX_ATTEMPTS) throw error;
    }
  }
}

/**
 * Changes the conversational state: `change` returns the new state (null: unchanged) and a value,
 * and the value of the attempt that was written is returned. So a value read from the state (a
 * pending confirmation taken) is handed to exactly one caller even when several race.
 */
export async function changeConversation<T>(
  access: StateAccess,
  change: (state: ConversationState) => [ConversationState | null, T],
): Promise<T> {
  let result!: T;
  await modifyState(access, (data) => {
    const [next, value] = change(readConversation(data));
    result = value;
    return next ? writeConversation(data, next) : null;
  });
  return result;
}

/**
 * Takes the pending confirmation out of the state (only the one with `id`, when given). A taken
 * confirmation that has expired is removed but not returned: it must never be executed.
 */
export function takePending(
  access: StateAccess,
  options: { id?: string; now?: number } = {},
): Promise<PendingConfirmation | null> {
  return changeConversation(access, (state) => {
    const pending = state.pending;
    if (!pending || (options.id !== undefined && pending.id !== options.id)) return [null, null];
    const { pending: _taken, ...rest } = state;
    return [rest, isExpired(pending, options.now ?? Date.now()) ? null : pending];
  });
}

/** Stores preferences (merged over the stored ones with `merge`); empty preferences remove them. */
export async function storePreferences(
  access: StateAccess,
  preferences: ContextPreferences,
  merge: boolean,
): Promise<ContextPreferences | undefined> {
  let stored: ContextPreferences | undefined;
  await modifyState(access, (data) => {
    const { preferences: _old, ...rest } = data;
    stored = merge ? { ...readPreferences(data), ...preferences } : preferences;
    if (Object.keys(stored).length === 0) stored = undefined;
    return stored ? { ...rest, preferences: stored } : rest;
  });
  return stored;
}

/** Removes preferences that were applied once, unless they changed since (then the new ones stay). */
export async function clearUsedPreferences(access: StateAccess, used: ContextPreferences): Promise<void> {
  const usedJson = JSON.stringify(used);
  await modifyState(access, (data) => {
    if (JSON.stringify(readPreferences(data)) !== usedJson) return null;
    const { preferences: _used, ...rest } = data;
    return rest;
  });
}
