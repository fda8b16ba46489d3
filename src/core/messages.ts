import { ThreadkeepError } from "./errors.js";
import { checkJson } from "./json-limits.js";
import { ROLES, type ChatMessage, type ContentPart, type Message, type MessageInput } from "./types.js";

function invalid(index: number, field: string, message: string): ThreadkeepError {
  return new ThreadkeepError("invalid_message", `messages[${index}].${field}: ${message}`, {
    details: { index, field },
  });
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Checks that a value is a chat message threadkeep can store and send back to a model.
 * Fields it does not interpret are kept as they are.
 * @throws ThreadkeepError `invalid_message` naming the offending field.
 */
export function validateMessage(value: unknown, index = 0): MessageInput {
  if (!isPlainObject(value)) throw invalid(index, "", "a message must be an object");
  const { role, content } = value;
  if (typeof role !== "string" || !(ROLES as readonly string[]).includes(role)) {
    throw invalid(index, "role", `unknown role ${JSON.stringify(role)}; expected one of ${ROLES.join(", ")}`);
  }
  const toolCalls = value.tool_calls;
  if (content === null || content === undefined) {
    if (role !== "assistant") throw invalid(index, "content", `a ${role} message needs content`);
  } else if (Array.isArray(content)) {
    content.forEach((part, i) => {
      if (!isPlainObject(part) || typeof part.type !== "string") {
        throw invalid(index, `content[${i}]`, "a content part must be an object with a string type");
      }
      if (part.type === "text" && typeof part.text !== "string") {
        throw invalid(index, `content[${i}].text`, "a text part needs a string text");
      }
    });
  } else if (typeof content !== "string") {
    throw invalid(index, "content", "content must be a string, an array of content parts, or null");
  }
  if (value.name !== undefined && typeof value.name !== "string") throw invalid(index, "name", "must be a string");
  if (toolCalls !== undefined) {
    if (role !== "assistant") throw invalid(index, "tool_calls", "only assistant messages carry tool_calls");
    if (!Array.isArray(toolCalls)) throw invalid(index, "tool_calls", "must be an array");
    toolCalls.forEach((call, i) => {
      const fn = isPlainObject(call) ? call.function : undefined;
      if (!isPlainObject(call) || typeof call.id !== "string" || !isPlainObject(fn)) {
        throw invalid(index, `tool_calls[${i}]`, "a tool call needs an id and a function");
      }
      if (typeof fn.name !== "string" || typeof fn.arguments !== "string") {
        throw invalid(index, `tool_calls[${i}].function`, "needs a string name and string arguments");
      }
    });
  }
  if (role === "tool" && typeof value.tool_call_id !== "string") {
    throw invalid(index, "tool_call_id", "a tool message needs the tool_call_id it answers");
  }
  if (value.tool_call_id !== undefined && typeof value.tool_call_id !== "string") {
    throw invalid(index, "tool_call_id", "must be a string");
  }
  if (value.metadata !== undefined && !isPlainObject(value.metadata)) {
    throw invalid(index, "metadata", "must be an object");
  }
  if (value.incomplete !== undefined && typeof value.incomplete !== "boolean") {
    throw invalid(index, "incomplete", "must be a boolean");
  }
  // Deep nesting anywhere (metadata, pass-through fields) would overflow JSON.stringify in a store.
  checkJson(value, `messages[${index}]`);
  if (content === undefined) return { ...(value as unknown as MessageInput), content: null };
  return value as unknown as MessageInput;
}

/** Validates a list of messages to append. @throws ThreadkeepError `invalid_message`. */
export function validateMessages(values: unknown): MessageInput[] {
  if (!Array.isArray(values)) {
    throw new ThreadkeepError("invalid_message", "messages must be an array");
  }
  return values.map((value, index) => validateMessage(value, index));
}

/** The text of a message's content (text parts joined by newlines; other parts ignored). */
export function contentText(content: ChatMessage["content"]): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((part: ContentPart) => typeof part.text === "string")
    .map((part) => part.text)
    .join("\n");
}

/** The OpenAI chat message of a stored message: bookkeeping (`seq`, `createdAt`, metadata) removed. */
export function toChatMessage(message: Message | MessageInput): ChatMessage {
  const {
    seq: _seq,
    createdAt: _createdAt,
    metadata: _metadata,
    incomplete: _incomplete,
    ...chat
  } = message as Message;
  return chat;
}

/** Message metadata key holding the time a message was first said, kept by import and migration. */
export const CREATED_AT_KEY = "importedCreatedAt";

/** When a message was said: its original time when it was imported, else when the store accepted it. */
export function saidAt(message: Pick<Message, "createdAt" | "metadata">): number {
  const original = message.metadata?.[CREATED_AT_KEY];
  return typeof original === "number" ? original : message.createdAt;
}
