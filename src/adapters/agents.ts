/**
 * `threadkeep/agents`: an OpenAI Agents SDK `Session` kept by threadkeep. Agent items are stored as the
 * chat messages they mean (so the proxy, the CLI, search and context assembly read the same thread) and
 * come back exactly; the SDK's optional history transactions (with an operation id), history mutations
 * and compaction (by threadkeep's summaries) are implemented, held to the contract the SDK holds its own
 * `MemorySession` to: input is checked as the SDK checks it, before anything is written.
 * `@openai/agents` is an optional peer dependency.
 */
import {
  type AgentInputItem,
  applySessionHistoryMutations,
  type OpenAIResponsesCompactionAwareSession,
  type OpenAIResponsesCompactionResult,
  RequestUsage,
  type SessionHistoryRewriteArgs,
  type SessionHistoryRewriteAwareSession,
  type SessionHistoryTransactionArgs,
  type SessionHistoryTransactionAwareSession,
} from "@openai/agents";
import { isThreadkeepError, ThreadkeepError } from "../core/errors.js";
import { newSessionId } from "../core/ids.js";
import { itemsToMessages, messageToItems } from "../core/items/index.js";
import type { Memory } from "../core/memory/memory.js";
import type { Message } from "../core/types.js";
import { type MemoryOrUrl, orEmpty, resolveMemory, sessionIdFor } from "./_memory.js";
import { checkedItems, fingerprint } from "./_agent-data.js";
import { sortedData } from "../transfer/canonical.js";
import { agentItemsToMessages, type ItemIdFor, messagesToAgentItems, operationItemIds } from "./_agent-items.js";
import { checkedMutations, checkedTransaction } from "./_agent-transaction.js";

/** Options of {@link ThreadkeepSession}. */
export interface ThreadkeepSessionOptions {
  /** A `Memory`, or a store URL opened for you (one `Memory` per URL in the process). */
  memory: MemoryOrUrl;
  /** Any string (a threadkeep session id is used as it is). @default a new session id */
  sessionId?: string;
  /** The owner. @default the memory's default user */
  userId?: string;
}

/** Where a written message, or the branch a replacement leaves, records the suffix transaction that made it. */
const OPERATION_KEY = "agentsOperation";

/** How often a rewrite is tried again when another write came in between (it re-reads the history each time). */
const REWRITE_ATTEMPTS = 5;

interface OperationRecord {
  id: string;
  digest: string;
}

const recordOf = (metadata: Record<string, unknown> | undefined, id: string) => {
  const record = metadata?.[OPERATION_KEY] as OperationRecord | undefined;
  return record?.id === id ? record : undefined;
};

/** An Agents SDK session whose history lives in a threadkeep session. */
export class ThreadkeepSession
  implements
    SessionHistoryTransactionAwareSession,
    SessionHistoryRewriteAwareSession,
    OpenAIResponsesCompactionAwareSession
{
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
    return orEmpty(
      () => this.memory.getMessages(this.#id, { userId: this.userId, ...(last === undefined ? {} : { last }) }),
      [],
    );
  }

  /** The most recent `limit` items (all without it), oldest first. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (limit === undefined) return messagesToAgentItems(await this.#messages());
    if (limit <= 0) return [];
    // A message holds one item or more, except one of another client an agent cannot replay: read more then.
    for (let last = limit; ; last *= 2) {
      const messages = await this.#messages(last);
      const items = messagesToAgentItems(messages);
      if (items.length >= limit || messages.length < last) return items.slice(-limit);
    }
  }

  /** Appends items. @throws `invalid_message` naming an item the SDK never produces; nothing is stored then. */
  async addItems(items: AgentInputItem[]): Promise<void> {
    const checked = checkedItems(items);
    if (checked.length === 0) return;
    await this.memory.addMessages(this.#id, agentItemsToMessages(checked), { userId: this.userId });
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
          await this.memory.replaceAfter(this.#id, last.seq - 1, rest, {
            userId: this.userId,
            expectedLastSeq: last.seq,
          });
        }
        return messagesToAgentItems([last]).at(-1);
      } catch (error) {
        // Another write came in between: pop what is last now.
        if (!isThreadkeepError(error, "history_conflict") || attempt >= REWRITE_ATTEMPTS) throw error;
      }
    }
  }

  /** Removes every item, and forgets the operation ids of applied history transactions. */
  async clearSession(): Promise<void> {
    await orEmpty(() => this.memory.clear(this.#id, { userId: this.userId }), undefined);
  }

  /**
   * Replaces function calls by call id, atomically, as the SDK's `applySessionHistoryMutations` does
   * (the SDK's own function computes the new history); the replaced items are kept as a branch.
   * @throws `invalid_request` for a malformed mutation, before any change.
   */
  async applyHistoryMutations(args: SessionHistoryRewriteArgs): Promise<void> {
    const mutations = checkedMutations(args);
    if (mutations.length === 0) return;
    for (let attempt = 0; ; attempt++) {
      const messages = await this.#messages();
      const items = messagesToAgentItems(messages);
      const next = applySessionHistoryMutations(items, mutations);
      let from = 0;
      while (from < items.length && from < next.length && fingerprint(items[from]) === fingerprint(next[from])) from++;
      if (from === items.length && from === next.length) return;
      try {
        await this.#replaceFrom(messages, items, from, next.slice(from), {});
        return;
      } catch (error) {
        if (!isThreadkeepError(error, "history_conflict") || attempt >= REWRITE_ATTEMPTS) throw error;
      }
    }
  }

  /**
   * Appends items, or replaces a suffix of the history that must match `expectedSuffix`, once per
   * operation id, atomically (the SDK's `SessionHistoryTransactionAwareSession` contract): a retry of
   * the same operation changes nothing; the same id with another transaction (`operation_conflict`),
   * or a suffix that does not match (`history_conflict`), fails without changing history and leaves
   * the id unused. Bad arguments fail with `invalid_request` before anything is read. The items a
   * replacement supersedes are kept as a branch.
   */
  async applyHistoryTransaction(args: SessionHistoryTransactionArgs): Promise<void> {
    const { operationId, transaction } = checkedTransaction(args);
    const owner = { userId: this.userId, operationId };
    const ids = operationItemIds(operationId);
    if (transaction.type === "append_items") {
      // The store remembers the operation id with the write; item ids derived from it (and sorted keys)
      // make a retry the same write.
      await this.memory.addMessages(this.#id, agentItemsToMessages(sortedData(transaction.items), ids), owner);
      return;
    }
    const digest = fingerprint(transaction);
    const messages = await this.#messages();
    const applied = await this.#applied(messages, operationId);
    if (applied) {
      if (applied.digest === digest) return;
      throw new ThreadkeepError(
        "operation_conflict",
        `Operation ${JSON.stringify(operationId)} was already applied with another transaction`,
      );
    }
    const { expectedSuffix, replacement } = transaction;
    const items = messagesToAgentItems(messages);
    const from = items.length - expectedSuffix.length;
    if (from < 0 || fingerprint(items.slice(from)) !== fingerprint(expectedSuffix)) {
      throw new ThreadkeepError("history_conflict", "The session history does not end with the expected suffix");
    }
    // Nothing removed, nothing written: the store alone remembers the operation id (as an empty append).
    if (expectedSuffix.length === 0 && replacement.length === 0) {
      await this.memory.addMessages(this.#id, [], owner);
      return;
    }
    await this.#replaceFrom(messages, items, from, replacement, {
      operationId,
      ids,
      record: { id: operationId, digest },
    });
  }

  /** The record of a suffix transaction with this id: on a message it wrote, or on the branch of what it replaced. */
  async #applied(messages: Message[], operationId: string): Promise<OperationRecord | undefined> {
    for (const m of messages) {
      const found = recordOf(m.metadata, operationId);
      if (found) return found;
    }
    const branches = await orEmpty(() => this.memory.listBranches(this.#id, { userId: this.userId }), []);
    for (const b of branches) {
      const found =
        recordOf(b.metadata, operationId) ?? b.messages.map((m) => recordOf(m.metadata, operationId)).find(Boolean);
      if (found) return found;
    }
    return undefined;
  }

  /**
   * Replaces the items from index `from` on with `tail`, in one write that applies only while the
   * history is still `messages`; the items before `from` of the message holding it are written again.
   */
  async #replaceFrom(
    messages: Message[],
    items: AgentInputItem[],
    from: number,
    tail: AgentInputItem[],
    options: { operationId?: string; ids?: ItemIdFor; record?: OperationRecord },
  ): Promise<void> {
    let at = 0;
    let count = 0;
    for (let n: number; at < messages.length && count + (n = messagesToAgentItems([messages[at]]).length) <= from; at++)
      count += n;
    const first = messages[at];
    const lastSeq = messages.at(-1)?.seq ?? 0;
    const written = [...agentItemsToMessages(items.slice(count, from)), ...agentItemsToMessages(tail, options.ids)];
    const mark = options.record ? { [OPERATION_KEY]: options.record } : undefined;
    if (mark && written.length) written[0].metadata = { ...written[0].metadata, ...mark };
    await this.memory.replaceAfter(this.#id, first ? first.seq - 1 : lastSeq, written, {
      userId: this.userId,
      expectedLastSeq: lastSeq,
      ...(options.operationId ? { operationId: options.operationId } : {}),
      // What a rewrite supersedes is kept, as any edit of a history is.
      ...(first ? { branch: { reason: "edit" as const, metadata: mark ?? {} } } : {}),
    });
  }

  /** Summarises older turns with the memory's summarizer (nothing without one). */
  async runCompaction(): Promise<OpenAIResponsesCompactionResult | null> {
    const result = await orEmpty(() => this.memory.compact(this.#id, { userId: this.userId }), { dropped: 0 });
    return result.summary ? { usage: new RequestUsage() } : null;
  }
}

export { closeOpenedMemories } from "./_memory.js";
export type { MemoryOrUrl } from "./_memory.js";
