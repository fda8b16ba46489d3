/**
 * A session read as Responses items: the items of its messages, the responses stored in it, and
 * removing items or responses from it. A response is remembered in the `metadata.response` of its
 * last output message, with how many messages its input and output took.
 */
import type { Memory } from "../memory/memory.js";
import type { Message, MessageInput } from "../types.js";
import { itemsToMessages, messageToItems } from "./convert.js";
import { type Item, ITEMS_KEY } from "./types.js";

/** The metadata key of a stored response. */
export const RESPONSE_KEY = "response";

/** What threadkeep keeps of a response besides its items (the fields of the `response` object). */
export interface StoredResponse {
  id: string;
  /** How many stored messages the response's input and output took. */
  inputCount: number;
  outputCount: number;
  [field: string]: unknown;
}

/** A stored response found in a session's messages. */
export interface FoundResponse {
  record: StoredResponse;
  /** The messages of its input, and of its output (the last one carries the record). */
  input: Message[];
  output: Message[];
  /** True when nothing was stored after it: a continuation can go on in the same session. */
  isHead: boolean;
}

/** Finds a response among a session's messages (oldest first, contiguous). */
export function findResponse(messages: readonly Message[], responseId: string): FoundResponse | null {
  const index = messages.findLastIndex(
    (m) => (m.metadata?.[RESPONSE_KEY] as StoredResponse | undefined)?.id === responseId,
  );
  if (index < 0) return null;
  const record = messages[index].metadata?.[RESPONSE_KEY] as StoredResponse;
  // A record not of our making (metadata is writable through the session API) finds nothing.
  if (!Number.isSafeInteger(record.inputCount) || !Number.isSafeInteger(record.outputCount) || record.outputCount < 1)
    return null;
  const outputStart = Math.max(0, index + 1 - record.outputCount);
  const inputStart = Math.max(0, outputStart - record.inputCount);
  return {
    record,
    input: messages.slice(inputStart, outputStart),
    output: messages.slice(outputStart, index + 1),
    isHead: index === messages.length - 1,
  };
}

/** An item with the seq of the message that holds it. */
export interface SeqItem {
  item: Item;
  seq: number;
}

/** Every item of the messages, in order. */
export function itemsOf(messages: readonly Message[]): SeqItem[] {
  return messages.flatMap((m) => messageToItems(m).map((item) => ({ item, seq: m.seq })));
}

/** The message as stored again: its derived item ids written down, so they survive a new seq. */
function withPinnedIds(message: Message): MessageInput {
  const { seq: _seq, createdAt: _createdAt, ...input } = message;
  if (Array.isArray(input.metadata?.[ITEMS_KEY])) return input;
  return { ...input, metadata: { ...input.metadata, [ITEMS_KEY]: messageToItems(message).map((i) => ({ id: i.id })) } };
}

/**
 * Removes items from a session under its turn lease, in one atomic replace: the messages from the
 * first affected one on are stored again without them (item ids and responses stay as they were;
 * later messages get new seqs). @returns how many items were removed.
 */
export async function removeItems(
  memory: Memory,
  sessionId: string,
  userId: string,
  remove: (item: Item, seq: number) => boolean,
): Promise<number> {
  return memory.runTurn(sessionId, async (lease) => {
    const messages = await memory.getMessages(sessionId, { userId });
    const first = messages.findIndex((m) => messageToItems(m).some((item) => remove(item, m.seq)));
    if (first < 0) return 0;
    let removed = 0;
    const rewritten: MessageInput[] = [];
    for (const message of messages.slice(first)) {
      const items = messageToItems(message);
      const kept = items.filter((item) => !remove(item, message.seq));
      removed += items.length - kept.length;
      if (kept.length === items.length) {
        rewritten.push(withPinnedIds(message));
        continue;
      }
      if (kept.length === 0) continue;
      const again = itemsToMessages(kept);
      // The response record stays on the last message that held part of it.
      const record = message.metadata?.[RESPONSE_KEY];
      if (record) again[again.length - 1].metadata = { ...again[again.length - 1].metadata, [RESPONSE_KEY]: record };
      rewritten.push(...again);
    }
    // One atomic replace: the tail is stored again without the removed items, or not at all.
    await memory.replaceAfter(sessionId, messages[first].seq - 1, rewritten, {
      userId,
      fence: lease.fence,
      expectedLastSeq: messages.at(-1)?.seq,
    });
    return removed;
  });
}
