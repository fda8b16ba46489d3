import type { AssembledContext, ContextPreferences } from "../context/types.js";
import type { ConversationState, EntityRef, PendingConfirmation, PendingInput } from "../state/conversation.js";
import type { Resolution } from "../state/references.js";
import type { Branch, BranchReason, Message, MessageInput, MessageQuery, SearchHit, Session, SessionState } from "../types.js";
import type { AddMessagesOptions, BuildContextOptions, OwnerOptions, ReplaceAfterOptions } from "./memory-options.js";
import type { StateApi } from "./state-api.js";

/**
 * What a {@link SessionHandle} calls on its {@link Memory}, which implements it: the handle names this
 * interface rather than the class, so that the Memory, which makes handles, and the handle do not
 * import each other.
 */
export interface SessionMemory
  extends Pick<StateApi, "getState" | "updateState" | "getConversation" | "addReference" | "setIntent" | "setPendingConfirmation" | "setPreferences" | "recall" | "resolve"> {
  getSession(sessionId: string, options: OwnerOptions & { create?: boolean }): Promise<Session>;
  deleteSession(sessionId: string, options: OwnerOptions): Promise<void>;
  addMessages(sessionId: string, messages: MessageInput[], options: AddMessagesOptions): Promise<Message[]>;
  replaceAfter(sessionId: string, seq: number, messages: MessageInput[], options: ReplaceAfterOptions): Promise<Message[]>;
  pop(sessionId: string, options: OwnerOptions): Promise<Message | null>;
  listBranches(sessionId: string, options: OwnerOptions): Promise<Branch[]>;
  getBranch(sessionId: string, branchId: number, options: OwnerOptions): Promise<Branch>;
  switchBranch(sessionId: string, branchId: number, options: OwnerOptions): Promise<Branch>;
  branchAt(sessionId: string, seq: number, options: OwnerOptions & { reason?: BranchReason; metadata?: Record<string, unknown> }): Promise<Branch | null>;
  getMessages(sessionId: string, query: MessageQuery & OwnerOptions): Promise<Message[]>;
  search(text: string, options: OwnerOptions & { sessionId?: string; mode?: "substring" | "fulltext"; ranking?: "relevance" | "recency"; limit?: number }): Promise<SearchHit[]>;
  buildContext(sessionId: string, options: BuildContextOptions): Promise<AssembledContext>;
  clear(sessionId: string, options: OwnerOptions): Promise<void>;
  undoTurn(sessionId: string, options: OwnerOptions): Promise<Message[]>;
  fork(sessionId: string, options: OwnerOptions & { atSeq?: number; id?: string }): Promise<Session>;
  confirmPending(sessionId: string, options: OwnerOptions & { id?: string; now?: number }): Promise<PendingConfirmation | null>;
  cancelPending(sessionId: string, options: OwnerOptions): Promise<PendingConfirmation | null>;
}

/** A session of one owner, bound for convenience: every method forwards to {@link Memory}. */
export class SessionHandle {
  readonly #memory: SessionMemory;
  readonly id: string;
  readonly userId: string;

  constructor(memory: SessionMemory, id: string, userId: string) {
    this.#memory = memory;
    this.id = id;
    this.userId = userId;
  }

  #owner(): OwnerOptions {
    return { userId: this.userId };
  }

  /** The session record. */
  info(): Promise<Session> {
    return this.#memory.getSession(this.id, { ...this.#owner(), create: true });
  }
  addMessage(message: MessageInput): Promise<Message> {
    return this.#memory.addMessages(this.id, [message], this.#owner()).then(([stored]) => stored);
  }
  addMessages(messages: MessageInput[], options: Omit<AddMessagesOptions, "userId" | "session"> = {}): Promise<Message[]> {
    return this.#memory.addMessages(this.id, messages, { ...options, ...this.#owner() });
  }
  replaceAfter(seq: number, messages: MessageInput[], options: Omit<ReplaceAfterOptions, "userId" | "session"> = {}): Promise<Message[]> {
    return this.#memory.replaceAfter(this.id, seq, messages, { ...options, ...this.#owner() });
  }
  pop(): Promise<Message | null> {
    return this.#memory.pop(this.id, this.#owner());
  }
  listBranches(): Promise<Branch[]> {
    return this.#memory.listBranches(this.id, this.#owner());
  }
  getBranch(branchId: number): Promise<Branch> {
    return this.#memory.getBranch(this.id, branchId, this.#owner());
  }
  switchBranch(branchId: number): Promise<Branch> {
    return this.#memory.switchBranch(this.id, branchId, this.#owner());
  }
  branchAt(seq: number, options: { reason?: BranchReason; metadata?: Record<string, unknown> } = {}): Promise<Branch | null> {
    return this.#memory.branchAt(this.id, seq, { ...options, ...this.#owner() });
  }
  getMessages(query: MessageQuery = {}): Promise<Message[]> {
    return this.#memory.getMessages(this.id, { ...query, ...this.#owner() });
  }
  search(
    text: string,
    options: { mode?: "substring" | "fulltext"; ranking?: "relevance" | "recency"; limit?: number } = {},
  ): Promise<SearchHit[]> {
    return this.#memory.search(text, { ...options, ...this.#owner(), sessionId: this.id });
  }
  getState(): Promise<SessionState> {
    return this.#memory.getState(this.id, this.#owner());
  }
  updateState(update: (data: Record<string, unknown>) => Record<string, unknown>): Promise<SessionState> {
    return this.#memory.updateState(this.id, update, this.#owner());
  }
  context(options: Omit<BuildContextOptions, "userId"> = {}): Promise<AssembledContext> {
    return this.#memory.buildContext(this.id, { ...options, ...this.#owner() });
  }
  clear(): Promise<void> {
    return this.#memory.clear(this.id, this.#owner());
  }
  undoTurn(): Promise<Message[]> {
    return this.#memory.undoTurn(this.id, this.#owner());
  }
  async fork(options: { atSeq?: number; id?: string } = {}): Promise<SessionHandle> {
    const fork = await this.#memory.fork(this.id, { ...options, ...this.#owner() });
    return new SessionHandle(this.#memory, fork.id, this.userId);
  }
  delete(): Promise<void> {
    return this.#memory.deleteSession(this.id, this.#owner());
  }
  conversation(): Promise<ConversationState> {
    return this.#memory.getConversation(this.id, this.#owner());
  }
  resolve(text: string, options: { now?: number } = {}): Promise<Resolution> {
    return this.#memory.resolve(this.id, text, { ...options, ...this.#owner() });
  }
  addReference(entity: Omit<EntityRef, "at">): Promise<ConversationState> {
    return this.#memory.addReference(this.id, entity, this.#owner());
  }
  setIntent(name: string): Promise<ConversationState> {
    return this.#memory.setIntent(this.id, name, this.#owner());
  }
  setPendingConfirmation(input: PendingInput): Promise<PendingConfirmation> {
    return this.#memory.setPendingConfirmation(this.id, input, this.#owner());
  }
  confirmPending(options: { id?: string; now?: number } = {}): Promise<PendingConfirmation | null> {
    return this.#memory.confirmPending(this.id, { ...options, ...this.#owner() });
  }
  cancelPending(): Promise<PendingConfirmation | null> {
    return this.#memory.cancelPending(this.id, this.#owner());
  }
  setPreferences(
    preferences: ContextPreferences,
    options: { merge?: boolean } = {},
  ): Promise<ContextPreferences | undefined> {
    return this.#memory.setPreferences(this.id, preferences, { ...options, ...this.#owner() });
  }
  recall(
    text: string,
    options: { mode?: "substring" | "fulltext"; around?: number; sticky?: boolean } = {},
  ): Promise<SearchHit | null> {
    return this.#memory.recall(this.id, text, { ...options, ...this.#owner() });
  }
}
