/**
 * `threadkeep/agents`: an OpenAI Agents SDK `Session` kept by threadkeep. Agent items are stored as the
 * chat messages they mean (so the proxy, the CLI, search and context assembly read the same thread) and
 * come back exactly; the SDK's optional history transactions (with an operation id) and compaction (by
 * threadkeep's summaries) are implemented. `@openai/agents` is an optional peer dependency.
 */
import { createHash } from "node:crypto";
import {
  type AgentInputItem,
  type OpenAIResponsesCompactionAwareSession,
  type OpenAIResponsesCompactionResult,
  RequestUsage,
  type SessionHistoryTransactionArgs,
  type SessionHistoryTransactionAwareSession,
} from "@openai/agents";
import { canonical } from "../cli/_jsonl-format.js";
import { isThreadkeepError, ThreadkeepError } from "../core/errors.js";
import { newSessionId } from "../core/ids.js";
import { itemsToMessages, messageToItems } from "../core/items/index.js";
import type { Memory } from "../core/memory.js";
import type { Message } from "../core/types.js";
import { type MemoryOrUrl, orEmpty, resolveMemory, sessionIdFor } from "./_memory.js";
import { agentItemsToMessages, messagesToAgentItems, operationItemIds } from "./_agent-items.js";

/** Options of {@link ThreadkeepSession}. */
export interface ThreadkeepSessionOptions {
  /** A `Memory`, or a store URL opened for you (one `Memory` per URL in the process). */
  memory: MemoryOrUrl;
  /** Any string (a threadkeep session id is used as it is). @default a new session id */
  sessionId?: string;
  /** The owner. @default the memory's default user */
  userId?: string;
}

/** Where a message records the history transaction that wrote it. */
const OPERATION_KEY = "agentsOperation";

const digest = (value: unknown) => createHash("sha256").update(JSON.stringify(canonical(value))).digest("hex");

/** An Agents SDK session whose history lives in a threadkeep session. */
export class ThreadkeepSession implements SessionHistoryTransactionAwareSession, OpenAIResponsesCompactionAwareSession {
  readonly memory: Memory;
  readonly userId: string;
  readonly #id: string;

  constructor(options: ThreadkeepSessionOptions) {
    this.memory = resolveMemory(options.memory);
    this.userId = options.userId ?? this.memory.settings.defaultUserId;
    this.#id = options.sessionId === undefined ? newSessionId() : sessionIdFor(options.sessionId, this.userId);
  }

  /** The threadkeep session id (created on the first write). */
  async getSessionId(): Promise<string> {
    return this.#id;
  }

  #messages(last?: number): Promise<Message[]> {
    return orEmpty(() => this.memory.getMessages(this.#id, { userId: this.userId, ...(last === undefined ? {} : { last }) }), []);
  }

  /** The most recent `limit` items (all without it), oldest first. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (limit !== undefined && limit <= 0) return [];
    // A message holds at least one item, so the last `limit` messages hold the last `limit` items.
    const items = messagesToAgentItems(await this.#messages(limit));
    return limit === undefined ? items : items.slice(-limit);
  }

  async addItems(items: AgentInputItem[]): Promise<void> {
    if (items.length === 0) return;
    await this.memory.addMessages(this.#id, agentItemsToMessages(items), { userId: this.userId });
  }

  /** Removes and returns the most recent item; the other items of its message stay. */
  async popItem(): Promise<AgentInputItem | undefined> {
    for (let attempt = 0; ; attempt++) {
      const [last] = await this.#messages(1);
      if (!last) return undefined;
      const items = messageToItems(last);
      try {
        if (items.length <= 1) await this.memory.pop(this.#id, { userId: this.userId });
        else {
          const rest = itemsToMessages(items.slice(0, -1));
          await this.memory.replaceAfter(this.#id, last.seq - 1, rest, { userId: this.userId, expectedLastSeq: last.seq });
        }
        return messagesToAgentItems([last]).at(-1);
      } catch (error) {
        // Another write came in between: pop what is last now.
        if (!isThreadkeepError(error, "history_conflict") || attempt >= 5) throw error;
      }
    }
  }

  async clearSession(): Promise<void> {
    await orEmpty(() => this.memory.clear(this.#id, { userId: this.userId }), undefined);
  }

  /**
   * Appends items, or replaces a suffix of the history that must match `expectedSuffix`, once per
   * operation id, atomically: a retry of the same operation changes nothing; the same id with another
   * transaction (`operation_conflict`), or a suffix that does not match (`history_conflict`), fails
   * without changing history.
   */
  async applyHistoryTransaction({ operationId, transaction }: SessionHistoryTransactionArgs): Promise<void> {
    const owner = { userId: this.userId, operationId };
    const ids = operationItemIds(operationId);
    if (transaction.type === "append_items") {
      // The store remembers the operation id with the write; item ids derived from it make a retry the same write.
      await this.memory.addMessages(this.#id, agentItemsToMessages(transaction.items, ids), owner);
      return;
    }
    const fingerprint = digest(transaction);
    const messages = await this.#messages();
    const applied = messages.find((m) => (m.metadata?.[OPERATION_KEY] as { id?: string } | undefined)?.id === operationId);
    if (applied) {
      if ((applied.metadata![OPERATION_KEY] as { digest: string }).digest === fingerprint) return;
      throw new ThreadkeepError("operation_conflict", `Operation ${operationId} was already applied with another transaction`);
    }
    const { expectedSuffix, replacement } = transaction;
    const items = messagesToAgentItems(messages);
    if (expectedSuffix.length > items.length || digest(items.slice(items.length - expectedSuffix.length)) !== digest(expectedSuffix)) {
      throw new ThreadkeepError("history_conflict", "The session history does not end with the expected suffix");
    }
    // From the first message holding part of the suffix on; the items it holds before the suffix stay.
    let covered = 0;
    let at = messages.length;
    while (covered < expectedSuffix.length) covered += messagesToAgentItems([messages[--at]]).length;
    const first = messages[at];
    const lastSeq = messages.at(-1)?.seq ?? 0;
    const kept = first ? messageToItems(first).slice(0, covered - expectedSuffix.length) : [];
    const written = [...(kept.length ? itemsToMessages(kept) : []), ...agentItemsToMessages(replacement, ids)];
    if (written.length) written[0].metadata = { ...written[0].metadata, [OPERATION_KEY]: { id: operationId, digest: fingerprint } };
    await this.memory.replaceAfter(this.#id, first ? first.seq - 1 : lastSeq, written, { ...owner, expectedLastSeq: lastSeq });
  }

  /** Summarises older turns with the memory's summarizer (nothing without one). */
  async runCompaction(): Promise<OpenAIResponsesCompactionResult | null> {
    const result = await orEmpty(() => this.memory.compact(this.#id, { userId: this.userId }), { dropped: 0 });
    return result.summary ? { usage: new RequestUsage() } : null;
  }
}

export { closeOpenedMemories } from "./_memory.js";
export type { MemoryOrUrl } from "./_memory.js";
