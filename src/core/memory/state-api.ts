import { parseContextPreferences, readPreferences } from "../context/preferences.js";
import type { ContextPreferences } from "../context/types.js";
import type { MemoryCore } from "./memory-core.js";
import type { OwnerOptions } from "./memory-options.js";
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
} from "../state/conversation.js";
import type { Resolution } from "../state/references.js";
import { changeConversation, storePreferences, takePending } from "../state/session-state.js";

/** How the state API searches a session, for {@link StateApi.recall}: {@link Memory.search}. */
export type StateSearch = (
  text: string,
  options: OwnerOptions & { sessionId?: string; mode?: SearchMode | "auto"; limit?: number },
) => Promise<RankedHit[]>;

/**
 * The state API of a {@link Memory}, a part it holds and hands these methods to: the session's state
 * (`getState`, `updateState`), the context preferences and recall, and the conversational state (last
 * intent, referenced entities, the pending confirmation). Each method is the Memory method of the
 * same name, documented there; the Memory fills in the defaults.
 */
export class StateApi {
  readonly #core: MemoryCore;
  readonly #search: StateSearch;

  constructor(core: MemoryCore, search: StateSearch) {
    this.#core = core;
    this.#search = search;
  }

  async getState(sessionId: string, options: OwnerOptions): Promise<SessionState> {
    const session = await this.#core.resolve(sessionId, this.#core.owner(options), false);
    return (await this.#core.store).getState(session.id);
  }

  async updateState(
    sessionId: string,
    update: (data: Record<string, unknown>) => Record<string, unknown>,
    options: OwnerOptions & { expectedVersion?: number },
  ): Promise<SessionState> {
    const core = this.#core;
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
          if (!isThreadkeepError(error, "state_conflict") || options.expectedVersion !== undefined || attempt >= 20)
            throw error;
        }
      }
    } catch (error) {
      // A refused first write leaves no empty session behind.
      if (created) await store.deleteSession(session.id).catch(() => {});
      throw error;
    }
  }

  async getPreferences(sessionId: string, options: OwnerOptions): Promise<ContextPreferences | undefined> {
    const { store, sessionId: id } = await this.#core.access(sessionId, options, false);
    return readPreferences((await store.getState(id)).data);
  }

  async setPreferences(
    sessionId: string,
    preferences: ContextPreferences,
    options: OwnerOptions & { merge?: boolean },
  ): Promise<ContextPreferences | undefined> {
    const valid = parseContextPreferences(preferences);
    return storePreferences(await this.#core.access(sessionId, options), valid, options.merge ?? false);
  }

  async recall(
    sessionId: string,
    text: string,
    options: OwnerOptions & { mode?: "substring" | "fulltext"; around?: number; sticky?: boolean },
  ): Promise<SearchHit | null> {
    const [hit] = await this.#search(text, { userId: options.userId, sessionId, mode: options.mode, limit: 1 });
    if (!hit) return null;
    const around = options.around ?? 2;
    const focusRange = { fromSeq: Math.max(1, hit.seq - around), toSeq: hit.seq + around };
    await this.setPreferences(
      sessionId,
      { focusRange, ...(options.sticky ? { sticky: true } : {}) },
      { userId: options.userId, merge: true },
    );
    return hit;
  }

  async getConversation(sessionId: string, options: OwnerOptions): Promise<ConversationState> {
    const { store, sessionId: id } = await this.#core.access(sessionId, options, false);
    return readConversation((await store.getState(id)).data);
  }

  async patchConversation(sessionId: string, patch: unknown, options: OwnerOptions): Promise<ConversationState> {
    const valid = parseConversationPatch(patch);
    return changeConversation(await this.#core.access(sessionId, options), (state) => {
      const next = applyPatch(state, valid);
      return [next, next];
    });
  }

  async addReference(
    sessionId: string,
    entity: Omit<EntityRef, "at">,
    options: OwnerOptions,
  ): Promise<ConversationState> {
    return changeConversation(await this.#core.access(sessionId, options), (state) => {
      const next = withReference(state, entity);
      return [next, next];
    });
  }

  async setIntent(sessionId: string, name: string, options: OwnerOptions): Promise<ConversationState> {
    return changeConversation(await this.#core.access(sessionId, options), (state) => {
      const next = withIntent(state, name);
      return [next, next];
    });
  }

  async setPendingConfirmation(
    sessionId: string,
    input: PendingInput,
    options: OwnerOptions,
  ): Promise<PendingConfirmation> {
    const pending = newPending(input);
    return changeConversation(await this.#core.access(sessionId, options), (state) => [{ ...state, pending }, pending]);
  }

  /** Takes the pending confirmation: {@link Memory.confirmPending} and {@link Memory.cancelPending} alike. */
  async takePending(
    sessionId: string,
    options: OwnerOptions & { id?: string; now?: number },
  ): Promise<PendingConfirmation | null> {
    return takePending(await this.#core.access(sessionId, options), options);
  }

  async resolve(sessionId: string, text: string, options: OwnerOptions & { now?: number }): Promise<Resolution> {
    // Like buildContext, the first call of a turn: a new session is created, not "not found".
    const { store, sessionId: id } = await this.#core.access(sessionId, options);
    return this.#core.resolver.resolve(text, readConversation((await store.getState(id)).data), options.now);
  }
}
