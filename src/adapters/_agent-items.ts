/**
 * OpenAI Agents SDK items ↔ threadkeep messages, through the Responses items of `core/items` (the one
 * item ↔ chat message conversion): an agent item becomes the Responses item it means, carrying the
 * agent item itself, so it comes back exactly; items a chat model cannot take (reasoning, hosted tool
 * calls, …) are kept but never sent. Messages other clients stored read as the agent items they spell.
 */
import { createHash } from "node:crypto";
import type { AgentInputItem } from "@openai/agents";
import { type Item, type ItemContentPart, itemsToMessages, messageToItems, newItemId } from "../core/items/index.js";
import type { Message, MessageInput } from "../core/types.js";
import { fromStorable, toStorable } from "./_agent-data.js";

/** The field of a Responses item that carries the agent item it was made from. */
export const AGENT_ITEM_KEY = "agents_item";

type Loose = Record<string, unknown>;

function part(p: Loose): ItemContentPart {
  switch (p.type) {
    case "input_text":
    case "output_text":
      return { type: p.type, text: String(p.text ?? "") };
    case "refusal":
      return { type: "refusal", refusal: String(p.refusal ?? "") };
    case "input_image":
      return {
        type: "input_image",
        image_url: typeof p.image === "string" ? p.image : undefined,
        detail: p.detail ?? "auto",
      };
    default:
      return { ...p, type: String(p.type) };
  }
}

function outputText(output: unknown): string {
  if (typeof output === "string") return output;
  const o = output as Loose;
  return o?.type === "text" ? String(o.text) : JSON.stringify(output);
}

/** Gives a stored item its id: random, or derived from an operation id so a retried write is the same write. */
export type ItemIdFor = (type: string, index: number) => string;

/** Item ids derived from an operation id and the item's position. */
export function operationItemIds(operationId: string): ItemIdFor {
  return (type, index) =>
    newItemId(type).replace(
      /_.*$/,
      `_${createHash("sha256").update(`${operationId}\u0000${index}`).digest("hex").slice(0, 48)}`,
    );
}

/** The Responses item an agent item means (with the agent item in {@link AGENT_ITEM_KEY}). */
export function toResponsesItem(agentItem: AgentInputItem, idFor: ItemIdFor = newItemId, index = 0): Item {
  const a = toStorable(agentItem) as Loose;
  const carry = { [AGENT_ITEM_KEY]: a };
  const type = String(a.type ?? "message");
  const status = (a.status as string | undefined) ?? "completed";
  if (type === "message") {
    const content =
      typeof a.content === "string"
        ? [{ type: a.role === "assistant" ? "output_text" : "input_text", text: a.content }]
        : (a.content as Loose[]).map(part);
    return {
      id: idFor("message", index),
      type: "message",
      role: a.role as "user",
      content,
      status: status as "completed",
      ...carry,
    };
  }
  if (type === "function_call") {
    return {
      id: idFor(type, index),
      type,
      call_id: String(a.callId),
      name: String(a.name),
      arguments: String(a.arguments),
      status,
      ...carry,
    };
  }
  if (type === "function_call_result") {
    return {
      id: idFor("function_call_output", index),
      type: "function_call_output",
      call_id: String(a.callId),
      output: outputText(a.output),
      status,
      ...carry,
    };
  }
  return { id: idFor(type, index), type, ...carry };
}

/** The threadkeep messages that store agent items (checked ones: see `checkedItems`), in order. */
export function agentItemsToMessages(items: AgentInputItem[], idFor: ItemIdFor = newItemId): MessageInput[] {
  return itemsToMessages(items.map((item, i) => toResponsesItem(item, idFor, i)));
}

function agentItemOf(item: Item, names: Map<string, string>): AgentInputItem | null {
  const carried = item[AGENT_ITEM_KEY];
  if (carried) return fromStorable(carried) as AgentInputItem;
  const i = item as Loose;
  if (i.type === "message") {
    const parts = (i.content as ItemContentPart[]).filter((p) => typeof p.text === "string");
    if (i.role === "assistant") {
      return {
        type: "message",
        role: "assistant",
        status: "completed",
        content: parts.map((p) => ({ type: "output_text", text: p.text! })),
      } as AgentInputItem;
    }
    return { type: "message", role: i.role, content: parts.map((p) => p.text).join("\n") } as AgentInputItem;
  }
  if (i.type === "function_call") {
    names.set(String(i.call_id), String(i.name));
    return {
      type: "function_call",
      callId: i.call_id,
      name: i.name,
      arguments: i.arguments,
      status: "completed",
    } as AgentInputItem;
  }
  if (i.type === "function_call_output") {
    const text = typeof i.output === "string" ? i.output : JSON.stringify(i.output);
    return {
      type: "function_call_result",
      callId: i.call_id,
      name: names.get(String(i.call_id)) ?? "",
      status: "completed",
      output: { type: "text", text },
    } as AgentInputItem;
  }
  // An item of another client that an agent cannot replay (a Responses reasoning item without its agent form).
  return null;
}

/** The agent items stored messages stand for, in order. */
export function messagesToAgentItems(messages: readonly Message[]): AgentInputItem[] {
  const names = new Map<string, string>();
  return messages.flatMap((m) => messageToItems(m).flatMap((item) => agentItemOf(item, names) ?? []));
}
