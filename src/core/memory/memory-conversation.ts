/**
 * The conversational-state methods of {@link Memory}: last intent, referenced entities ("that task"),
 * and the pending confirmation. Each hands its work to `state/memory-state.ts`.
 */
import type { MemoryCore } from "./memory-core.js";
import type { OwnerOptions } from "./memory-options.js";
import type { ConversationState, EntityRef, PendingConfirmation, PendingInput } from "../state/conversation.js";
import * as state from "../state/memory-state.js";
import type { Resolution } from "../state/references.js";

/** The base of {@link Memory} that holds its conversational-state methods. */
export class MemoryConversation {
  #core: MemoryCore;

  constructor(core: MemoryCore) {
    this.#core = core;
  }

  /** The conversational state: last intent, referenced entities, pending confirmation. */
  async getConversation(sessionId: string, options: OwnerOptions = {}): Promise<ConversationState> {
    return state.getConversation(this.#core, sessionId, options);
  }

  /** Changes the conversational state: given fields replace, `null` clears. @throws `invalid_request` naming the field. */
  async patchConversation(sessionId: string, patch: unknown, options: OwnerOptions = {}): Promise<ConversationState> {
    return state.patchConversation(this.#core, sessionId, patch, options);
  }

  /** Records an entity the conversation just referenced; "that task" resolves to the latest task. */
  async addReference(sessionId: string, entity: Omit<EntityRef, "at">, options: OwnerOptions = {}): Promise<ConversationState> {
    return state.addReference(this.#core, sessionId, entity, options);
  }

  /** Records the user's last intent, as the application names it. */
  async setIntent(sessionId: string, name: string, options: OwnerOptions = {}): Promise<ConversationState> {
    return state.setIntent(this.#core, sessionId, name, options);
  }

  /** Asks for a confirmation: the action waits (replacing any earlier one) until confirmed, cancelled or expired. */
  async setPendingConfirmation(sessionId: string, input: PendingInput, options: OwnerOptions = {}): Promise<PendingConfirmation> {
    return state.setPendingConfirmation(this.#core, sessionId, input, options);
  }

  /**
   * Takes the pending confirmation to execute it: returned to exactly one caller, and null when there
   * is none, it expired, or it is not the one with `id`.
   */
  async confirmPending(sessionId: string, options: OwnerOptions & { id?: string; now?: number } = {}): Promise<PendingConfirmation | null> {
    return state.takePendingConfirmation(this.#core, sessionId, options);
  }

  /** Drops the pending confirmation. @returns it, or null when there was none (or it had expired). */
  async cancelPending(sessionId: string, options: OwnerOptions & { now?: number } = {}): Promise<PendingConfirmation | null> {
    return state.takePendingConfirmation(this.#core, sessionId, options);
  }

  /**
   * What a user message means for the conversational state, without a model call: a yes or no to
   * the pending confirmation (`expired` when it lapsed), a reference to the latest entity, or none.
   * It changes nothing: call {@link confirmPending} or {@link cancelPending} to act on it.
   */
  async resolve(sessionId: string, text: string, options: OwnerOptions & { now?: number } = {}): Promise<Resolution> {
    return state.resolve(this.#core, sessionId, text, options);
  }
}
