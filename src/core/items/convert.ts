/**
 * Items ↔ chat messages, the one conversion every dialect shares. Items are stored as the chat
 * messages a chat completions model reads (a `function_call` joins the assistant message's
 * `tool_calls`, a `function_call_output` is a `tool` message), and the message's `metadata.items`
 * keeps what the chat shape cannot (ids, annotations, reasoning items), so the items come back
 * exactly. A chat message stored by the chat completions API reads as the items it spells.
 */
import type { ChatMessage, ContentPart, Message, MessageInput, ToolCall } from "../types.js";
import type { FunctionCallItem, Item, ItemContentPart, ItemEntry, MessageItem } from "./types.js";
import { ITEMS_KEY } from "./types.js";

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  if (!isObject(a) || !isObject(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => k in b && deepEqual(a[k], b[k]));
}

// ---- items → chat content ----

function chatPart(part: ItemContentPart): ContentPart {
  switch (part.type) {
    case "input_text":
    case "output_text":
      return { type: "text", text: part.text ?? "" };
    case "input_image":
      return { type: "image_url", image_url: { url: part.image_url ?? part.file_id, detail: part.detail ?? "auto" } };
    case "input_file":
      return { type: "file", file: { file_id: part.file_id, file_data: part.file_data, filename: part.filename } };
    default:
      return { ...part };
  }
}

/** Chat content of item parts: one text part is a plain string, as chat clients write it. */
function chatContent(parts: ItemContentPart[]): ChatMessage["content"] {
  const kept = parts.filter((p) => p.type !== "refusal");
  if (kept.length === 1 && (kept[0].type === "input_text" || kept[0].type === "output_text")) return kept[0].text ?? "";
  return kept.map(chatPart);
}

function messageFromItem(item: MessageItem): MessageInput {
  const message: MessageInput = { role: item.role, content: chatContent(item.content) };
  const refusal = item.content.find((p) => p.type === "refusal");
  if (refusal && typeof refusal.refusal === "string") message.refusal = refusal.refusal;
  if (item.role === "assistant" && item.status === "incomplete") message.incomplete = true;
  return message;
}

function toolCall(item: FunctionCallItem): ToolCall {
  return { id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } };
}

// ---- chat message → items ----

function itemPart(part: ContentPart, assistant: boolean): ItemContentPart {
  if (part.type === "text")
    return assistant
      ? { type: "output_text", text: part.text ?? "", annotations: [] }
      : { type: "input_text", text: part.text ?? "" };
  if (part.type === "image_url" && isObject(part.image_url)) {
    const url = part.image_url.url;
    return {
      type: "input_image",
      image_url: typeof url === "string" ? url : null,
      detail: (part.image_url.detail as string) ?? "auto",
    };
  }
  if (part.type === "file" && isObject(part.file)) return { type: "input_file", ...part.file };
  return { ...part };
}

function itemParts(content: ChatMessage["content"], assistant: boolean): ItemContentPart[] {
  if (typeof content === "string") return [itemPart({ type: "text", text: content }, assistant)];
  return (content ?? []).map((p) => itemPart(p, assistant));
}

/** A derived id for an item of a chat message that never had one: stable while the message keeps its seq. */
function derivedId(prefix: string, seq: number | undefined, index: number): string {
  return `${prefix}_tk${seq ?? 0}${index > 0 ? `_${index}` : ""}`;
}

/** The items a chat message spells by itself (before its `metadata.items` are applied). */
function derivedItems(message: MessageInput & { seq?: number }): Item[] {
  const seq = message.seq;
  const status = message.incomplete ? "incomplete" : "completed";
  if (message.role === "tool") {
    const output = typeof message.content === "string" ? message.content : itemParts(message.content, false);
    return [
      {
        id: derivedId("fco", seq, 0),
        type: "function_call_output",
        call_id: message.tool_call_id ?? "",
        output,
        status,
      },
    ];
  }
  if (message.role !== "assistant") {
    const role = message.role === "developer" || message.role === "system" ? message.role : "user";
    return [
      { id: derivedId("msg", seq, 0), type: "message", role, content: itemParts(message.content, false), status },
    ];
  }
  const items: Item[] = [];
  const calls = message.tool_calls ?? [];
  const hasText =
    typeof message.content === "string"
      ? message.content.length > 0
      : Array.isArray(message.content) && message.content.length > 0;
  if (hasText || typeof message.refusal === "string" || calls.length === 0) {
    const content = message.content === null ? [] : itemParts(message.content, true);
    if (typeof message.refusal === "string") content.push({ type: "refusal", refusal: message.refusal });
    items.push({ id: derivedId("msg", seq, 0), type: "message", role: "assistant", content, status });
  }
  calls.forEach((call, i) => {
    items.push({
      id: derivedId("fc", seq, i + 1),
      type: "function_call",
      call_id: call.id,
      name: call.function?.name ?? "",
      arguments: call.function?.arguments ?? "",
      status,
    });
  });
  return items;
}

/** The entry that makes `derived` read back as `item`. */
function entryFor(item: Item, derived: Item | undefined): ItemEntry {
  if (!derived || derived.type !== item.type) return { item };
  const set: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(item)) {
    if (key !== "id" && !deepEqual(value, derived[key])) set[key] = value;
  }
  const unset = Object.keys(derived).filter((key) => !(key in item));
  return { id: item.id, ...(Object.keys(set).length ? { set } : {}), ...(unset.length ? { unset } : {}) };
}

/**
 * A function call may join an assistant message that spells exactly its items so far: calls, or
 * text (an empty or refusal-only message would read back differently once it carries calls).
 */
function callsCanJoin(message: MessageInput, items: Item[]): boolean {
  if (message.role !== "assistant" || message.incomplete) return false;
  const last = items.at(-1);
  if (last?.type === "function_call") return true;
  const content = message.content;
  const hasText = typeof content === "string" ? content.length > 0 : Array.isArray(content) && content.length > 0;
  return hasText && message.refusal === undefined;
}

/** Items the chat shape holds: messages, function calls and their outputs. */
function isChatItem(item: Item): boolean {
  return item.type === "message" || item.type === "function_call" || item.type === "function_call_output";
}

/**
 * The chat messages that store `items`, in order. Consecutive function calls join one assistant
 * message (with the assistant text before them, if any), as chat models expect parallel calls.
 * Items a chat model cannot read ride along in the `metadata.items` of the next message (or the
 * last one), so they are kept but never sent.
 */
export function itemsToMessages(items: readonly Item[]): MessageInput[] {
  const groups: { message: MessageInput; items: Item[]; hidden: Map<number, Item[]> }[] = [];
  let pendingHidden: Item[] = [];
  for (const item of items) {
    if (!isChatItem(item)) {
      pendingHidden.push(item);
      continue;
    }
    const last = groups.at(-1);
    const joinsLast =
      item.type === "function_call" &&
      last !== undefined &&
      pendingHidden.length === 0 &&
      callsCanJoin(last.message, last.items);
    if (joinsLast && last) {
      (last.message.tool_calls ??= []).push(toolCall(item as FunctionCallItem));
      last.items.push(item);
      continue;
    }
    let message: MessageInput;
    if (item.type === "message") message = messageFromItem(item as MessageItem);
    else if (item.type === "function_call")
      message = { role: "assistant", content: null, tool_calls: [toolCall(item as FunctionCallItem)] };
    else
      message = {
        role: "tool",
        tool_call_id: String(item.call_id),
        content: typeof item.output === "string" ? item.output : chatContent(item.output as ItemContentPart[]),
      };
    const hidden = new Map<number, Item[]>();
    if (pendingHidden.length) hidden.set(0, pendingHidden);
    pendingHidden = [];
    groups.push({ message, items: [item], hidden });
  }
  if (pendingHidden.length) {
    const last = groups.at(-1);
    if (last) last.hidden.set(last.items.length, [...(last.hidden.get(last.items.length) ?? []), ...pendingHidden]);
    // Only items a chat model cannot read: an empty assistant message carries them.
    else groups.push({ message: { role: "assistant", content: "" }, items: [], hidden: new Map([[0, pendingHidden]]) });
  }
  return groups.map(({ message, items: own, hidden }) => {
    const derived = derivedItems(message);
    const entries: ItemEntry[] = [];
    own.forEach((item, i) => {
      for (const h of hidden.get(i) ?? []) entries.push({ item: h });
      entries.push(entryFor(item, derived[i]));
    });
    for (const h of hidden.get(own.length) ?? []) entries.push({ item: h });
    if (own.length === 0) message.metadata = { [ITEMS_KEY]: entries, hiddenOnly: true };
    else message.metadata = { [ITEMS_KEY]: entries };
    return message;
  });
}

function isEntry(entry: unknown): entry is ItemEntry {
  if (!isObject(entry)) return false;
  if ("item" in entry)
    return isObject(entry.item) && typeof entry.item.id === "string" && typeof entry.item.type === "string";
  return (
    typeof entry.id === "string" &&
    (entry.set === undefined || isObject(entry.set)) &&
    (entry.unset === undefined || (Array.isArray(entry.unset) && entry.unset.every((k) => typeof k === "string")))
  );
}

/**
 * The items a stored message stands for: what its `metadata.items` recorded, or, for a message
 * stored by the chat completions API, the items it spells (ids derived from its seq).
 */
export function messageToItems(message: Message | (MessageInput & { seq?: number })): Item[] {
  const entries = message.metadata?.[ITEMS_KEY];
  const hiddenOnly = message.metadata?.hiddenOnly === true;
  const derived = hiddenOnly ? [] : derivedItems(message);
  // Metadata can be written by anyone through the session API: entries not of our making are ignored.
  if (!Array.isArray(entries) || !entries.every(isEntry)) return derived;
  const items: Item[] = [];
  let next = 0;
  for (const entry of entries as ItemEntry[]) {
    if ("item" in entry) {
      items.push(structuredClone(entry.item));
      continue;
    }
    const base = derived[next++];
    if (!base) continue;
    const item: Record<string, unknown> = { ...base, ...structuredClone(entry.set ?? {}), id: entry.id };
    for (const key of entry.unset ?? []) delete item[key];
    items.push(item as Item);
  }
  return items;
}

/** True when a stored message only carries items a chat model cannot read (it is never sent). */
export function isHiddenCarrier(message: MessageInput): boolean {
  return message.metadata?.hiddenOnly === true;
}
