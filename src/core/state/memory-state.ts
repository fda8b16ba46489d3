import { parseContextPreferences, readPreferences } from "../context/preferences.js";
import type { ContextPreferences } from "../context/types.js";
import type { MemoryCore } from "../memory/memory-core.js";
import type { OwnerOptions } from "../memory/memory-options.js";
import type { RankedHit, SearchMode } from "../search.js";
import type { SearchHit, SessionState } from "../types.js";
import { isThreadkeepError } from "../errors.js";
import { checkJson } from "../json-limits.js";
import {
  type ConversationState,
  type EntityRef,
  newPending,
  type PendingConfirmation,
  type PendingInput,
  parseConversationPatch,
  patchConversation as applyPatch,
  readConversation,
  withIntent,
  withReference,
} from "./conversation.js";
import type { Resolution } from "./references.js";
import { changeConversation, storePreferences, takePending } from "./session-state.js";

// The conversational-state methods of Memory: preferences, references, intents, confirmations.

type Search = (text: string, options: OwnerOptions & { sessionId?: string; mode?: SearchMode | "auto"; limit?: number }) => Promise<RankedHit[]>;

export async function getPreferences(core: MemoryCore, sessionId: string, options: OwnerOptions): Promise<ContextPreferences | undefined> {
  const { store, sessionId: id } = await core.access(sessionId, options, false);
  return readPreferences((await store.getState(id)).data);
}

export async function setPreferences(
  core: MemoryCore,
  sessionId: string,
  preferences: ContextPreferences,
  options: OwnerOptions & { merge?: boolean },
): Promise<ContextPreferences | undefined> {
  const valid = parseContextPreferences(preferences);
  return storePreferences(await core.access(sessionId, options), valid, options.merge ?? false);
}

export async function recall(
  core: MemoryCore,
  search: Search,
  sessionId: string,
  text: string,
  options: OwnerOptions & { mode?: "substring" | "fulltext"; around?: number; sticky?: boolean },
): Promise<SearchHit | null> {
  const [hit] = await search(text, { userId: options.userId, sessionId, mode: options.mode, limit: 1 });
  if (!hit) return null;
  const around = options.around ?? 2;
  const focusRange = { fromSeq: Math.max(1, hit.seq - around), toSeq: hit.seq + around };
  await setPreferences(core, sessionId, { focusRange, ...(options.sticky ? { sticky: true } : {}) }, { userId: options.userId, merge: true });
  return hit;
}

export async function getConversation(core: MemoryCore, sessionId: string, options: OwnerOptions): Promise<ConversationState> {
  const { store, sessionId: id } = await core.access(sessionId, options, false);
  return readConversation((await store.getState(id)).data);
}

export async function patchConversation(core: MemoryCore, sessionId: string, patch: unknown, options: OwnerOptions): Promise<ConversationState> {
  const valid = parseConversationPatch(patch);
  return changeConversation(await core.access(sessionId, options), (state) => {
    const next = applyPatch(state, valid);
    return [next, next];
  });
}

export async function addReference(core: MemoryCore, sessionId: string, entity: Omit<EntityRef, "at">, options: OwnerOptions): Promise<ConversationState> {
  return changeConversation(await core.access(sessionId, options), (state) => {
    const next = withReference(state, entity);
    return [next, next];
  });
}

export async function setIntent(core: MemoryCore, sessionId: string, name: string, options: OwnerOptions): Promise<ConversationState> {
  return changeConversation(await core.access(sessionId, options), (state) => {
    const next = withIntent(state, name);
    return [next, next];
  });
}

export async function setPendingConfirmation(core: MemoryCore, sessionId: string, input: PendingInput, options: OwnerOptions): Promise<PendingConfirmation> {
  const pending = newPending(input);
  return changeConversation(await core.access(sessionId, options), (state) => [{ ...state, pending }, pending]);
}

export async function takePendingConfirmation(
  core: MemoryCore,
  sessionId: string,
  options: OwnerOptions & { id?: string; now?: number },
): Promise<PendingConfirmation | null> {
  return takePending(await core.access(sessionId, options), options);
}

export async function resolve(core: MemoryCore, sessionId: string, text: string, options: OwnerOptions & { now?: number }): Promise<Resolution> {
  // Like buildContext, the first call of a turn: a new session is created, not "not found".
  const { store, sessionId: id } = await core.access(sessionId, options);
  return core.resolver.resolve(text, readConversation((await store.getState(id)).data), options.now);
}

export async function updateState(
  core: MemoryCore,
  sessionId: string,
  update: (data: Record<string, unknown>) => Record<string, unknown>,
  options: OwnerOptions & { expectedVersion?: number },
): Promise<SessionState> {
  const { session, created } = await core.open(sessionId, core.owner(options), true);
  const store = await core.store;
  const next = (data: Record<string, unknown>) => {
    const result = update(data);
    checkJson(result, "state.data");
    return result;
  };
  try {
    for (let attempt = 0; ; attempt++) {
      const current = await store.getState(session.id);
      if (options.expectedVersion !== undefined && current.version !== options.expectedVersion) {
        return await store.setState(session.id, next(current.data), options.expectedVersion);
      }
      try {
        return await store.setState(session.id, next(structuredClone(current.data)), current.version);
      } catch (error) {
        if (!isThreadkeepError(error, "state_conflict") || options.expectedVersion !== undefined || attempt >= 20) throw error;
      }
    }
  } catch (error) {
    // A refused first write leaves no empty session behind.
    if (created) await store.deleteSession(session.id).catch(() => {});
    throw error;
  }
}
