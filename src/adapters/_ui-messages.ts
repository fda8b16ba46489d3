/**
 * AI SDK UI messages ↔ threadkeep messages. A UI message is stored as the chat messages it means (an
 * assistant message's steps become assistant messages with `tool_calls` and their `tool` results), so
 * the proxy, search and context assembly read the same thread; the first of them keeps the UI message
 * itself, so ids, parts and metadata come back exactly. Messages other clients stored read as UI
 * messages too (ids derived from their seq).
 */
import { safeValidateUIMessages, type UIMessage } from "ai";
import { ThreadkeepError } from "../core/errors.js";
import { contentText } from "../core/messages.js";
import type { ContentPart, Message, MessageInput, ToolCall } from "../core/types.js";

/** The metadata key holding the UI message on the first chat message that stores it. */
export const UI_MESSAGE_KEY = "uiMessage";
/** The metadata key naming the UI message a later chat message belongs to. */
export const UI_PART_OF_KEY = "uiMessageId";

type Part = UIMessage["parts"][number] & Record<string, unknown>;

const isToolPart = (part: Part) => part.type === "dynamic-tool" || part.type.startsWith("tool-");
const toolName = (part: Part) => (part.type === "dynamic-tool" ? String(part.toolName) : part.type.slice(5));

function userContent(parts: Part[]): MessageInput["content"] {
  const chat: ContentPart[] = [];
  for (const part of parts) {
    if (part.type === "text") chat.push({ type: "text", text: String(part.text) });
    else if (part.type === "file" && String(part.mediaType).startsWith("image/"))
      chat.push({ type: "image_url", image_url: { url: part.url } });
  }
  if (chat.every((p) => p.type === "text")) return chat.map((p) => p.text).join("\n");
  return chat;
}

/** The chat messages of one assistant step: its text, its finished tool calls, and their results. */
function assistantStep(parts: Part[]): MessageInput[] {
  const text = parts
    .filter((p) => p.type === "text")
    .map((p) => String(p.text))
    .join("");
  const done = parts.filter((p) => isToolPart(p) && (p.state === "output-available" || p.state === "output-error"));
  if (!text && done.length === 0) return [];
  const calls: ToolCall[] = done.map((p) => ({
    id: String(p.toolCallId),
    type: "function",
    function: { name: toolName(p), arguments: JSON.stringify(p.input ?? {}) },
  }));
  const results: MessageInput[] = done.map((p) => ({
    role: "tool",
    tool_call_id: String(p.toolCallId),
    content:
      p.state === "output-error"
        ? `Error: ${String(p.errorText)}`
        : typeof p.output === "string"
          ? p.output
          : JSON.stringify(p.output ?? null),
  }));
  // A step's text comes before its calls are answered; a step that only calls tools has null content.
  return [
    { role: "assistant", content: text || (calls.length ? null : ""), ...(calls.length ? { tool_calls: calls } : {}) },
    ...results,
  ];
}

/** What a message is, for an error: its index and id, never its content. */
function named(message: unknown, index: number): string {
  const id = (message as { id?: unknown } | null)?.id;
  return typeof id === "string" ? `message ${index} (${JSON.stringify(id.slice(0, 80))})` : `message ${index}`;
}

/** The first problem the AI SDK's schema finds, as `path: message` (the value itself is never shown). */
function firstIssue(error: unknown): string {
  const issues = ((error as { cause?: { issues?: { path?: PropertyKey[]; message?: string }[] } }).cause?.issues ??
    [])[0];
  if (!issues) return "it does not match the AI SDK's UIMessage schema";
  const path = (issues.path ?? []).slice(1).map(String).join(".");
  return `${path ? `${path}: ` : ""}${issues.message ?? "invalid"}`;
}

const notUIMessage = (message: unknown, index: number, why: string) =>
  new ThreadkeepError(
    "invalid_message",
    `saveChat: ${named(message, index)} is not a UIMessage the AI SDK produces: ${why}`,
    {
      details: { param: `messages[${index}]` },
    },
  );

/**
 * Plain JSON copies of the UI messages `saveChat` was handed: a JSON copy is what every store keeps (as the
 * AI SDK's persistence guide keeps a chat), so every store gives back the same messages.
 * @throws `invalid_message` for a value that is not an array of JSON objects.
 */
export function uiMessageCopies(messages: unknown): UIMessage[] {
  if (!Array.isArray(messages))
    throw new ThreadkeepError("invalid_message", "saveChat: messages must be an array of UIMessages", {
      details: { param: "messages" },
    });
  return Array.from({ length: messages.length }, (_, i) => {
    const message: unknown = messages[i];
    let copy: unknown;
    try {
      copy = JSON.parse(JSON.stringify(message ?? null));
    } catch {
      copy = null;
    }
    if (copy === null || typeof copy !== "object" || Array.isArray(copy))
      throw notUIMessage(message, i, "it is not an object of JSON data");
    return copy as UIMessage;
  });
}

/**
 * Checks UI messages from index `from` on with the AI SDK's own `validateUIMessages` (against the generic
 * UIMessage schema: tool, data and metadata schemas are the application's). The ones before `from` are
 * those already stored, checked when they were saved.
 * @throws `invalid_message` naming the first message the AI SDK never produces.
 */
export async function checkUIMessages(messages: UIMessage[], from = 0): Promise<void> {
  for (let i = from; i < messages.length; i++) {
    const message = messages[i];
    // An answer cut off before its first part has no parts yet; the schema wants one, a saved chat may not.
    const parts = (message as { parts?: unknown }).parts;
    const checked =
      Array.isArray(parts) && parts.length === 0 ? { ...message, parts: [{ type: "step-start" as const }] } : message;
    const result = await safeValidateUIMessages({ messages: [checked] });
    if (!result.success) throw notUIMessage(message, i, firstIssue(result.error));
  }
}

/** The chat messages that store a (checked) UI message, the first one carrying it whole. */
export function uiToMessages(message: UIMessage): MessageInput[] {
  const parts = message.parts as Part[];
  let stored: MessageInput[];
  if (message.role === "assistant") {
    const steps: Part[][] = [[]];
    for (const part of parts) {
      if (part.type === "step-start" && steps.at(-1)!.length) steps.push([]);
      else if (part.type !== "step-start") steps.at(-1)!.push(part);
    }
    stored = steps.flatMap(assistantStep);
    if (stored.length === 0) stored = [{ role: "assistant", content: "" }];
  } else {
    stored = [{ role: message.role, content: userContent(parts) }];
  }
  stored[0].metadata = { [UI_MESSAGE_KEY]: structuredClone(message) };
  for (const later of stored.slice(1)) later.metadata = { [UI_PART_OF_KEY]: message.id };
  return stored;
}

/** A stored UI message and the seq of its first chat message. */
export interface StoredUIMessage {
  message: UIMessage;
  seq: number;
}

/** The UI messages stored messages stand for, in order. */
export function messagesToUI(messages: readonly Message[]): StoredUIMessage[] {
  const result: StoredUIMessage[] = [];
  for (const m of messages) {
    const ui = m.metadata?.[UI_MESSAGE_KEY] as UIMessage | undefined;
    if (ui) result.push({ message: structuredClone(ui), seq: m.seq });
    else if (m.metadata?.[UI_PART_OF_KEY] !== undefined) continue;
    else if (m.role === "user" || m.role === "assistant" || m.role === "system") {
      const text = contentText(m.content);
      if (text)
        result.push({ message: { id: `msg-${m.seq}`, role: m.role, parts: [{ type: "text", text }] }, seq: m.seq });
    }
  }
  return result;
}
