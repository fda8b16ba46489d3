/**
 * `threadkeep/langchain`: a LangChain chat message history kept by threadkeep, for
 * `RunnableWithMessageHistory` and everything else that takes a `BaseListChatMessageHistory`.
 * Each LangChain message is stored as the OpenAI chat message it means (so the proxy, the CLI and
 * context assembly read it like any other) with the LangChain message itself in `metadata.langchain`,
 * so every message type round-trips exactly. `@langchain/core` is an optional peer dependency.
 */
import { BaseListChatMessageHistory } from "@langchain/core/chat_history";
import {
  AIMessage,
  type BaseMessage,
  HumanMessage,
  isBaseMessage,
  mapChatMessagesToStoredMessages,
  mapStoredMessagesToChatMessages,
  type StoredMessage,
  SystemMessage,
  ToolMessage,
} from "@langchain/core/messages";
import { ThreadkeepError } from "../core/errors.js";
import type { Memory } from "../core/memory/memory.js";
import type { ContentPart, Message, MessageInput, Role } from "../core/types.js";
import { type MemoryOrUrl, orEmpty, resolveMemory, sessionIdFor } from "./_memory.js";

/** Options of {@link ThreadkeepChatMessageHistory}. */
export interface ThreadkeepChatMessageHistoryOptions {
  /** A `Memory`, or a store URL opened for you (one `Memory` per URL in the process). */
  memory: MemoryOrUrl;
  /** Any string: a threadkeep session id is used as it is, another id maps to one session per user. */
  sessionId: string;
  /** The owner. @default the memory's default user */
  userId?: string;
}

const ROLE_OF_TYPE: Record<string, Role> = {
  human: "user",
  ai: "assistant",
  system: "system",
  developer: "developer",
  tool: "tool",
};

type Block = Record<string, unknown>;

const dataUrl = (block: Block) => {
  const mime = block.mimeType ?? block.mime_type;
  return typeof block.data === "string" && typeof mime === "string" ? `data:${mime};base64,${block.data}` : undefined;
};

/**
 * The chat completions part a LangChain content block means: text, an image (LangChain's `image_url`, or
 * a standard `image` block by URL or base64 data) or a file by data or id. Other blocks (reasoning, tool
 * call blocks, …) have no chat form and are left out of it (the LangChain message keeps them).
 */
function chatPart(block: Block): ContentPart | null {
  switch (block.type) {
    case "text":
      return typeof block.text === "string" ? { type: "text", text: block.text } : null;
    case "image_url": {
      const image =
        typeof block.image_url === "string" ? { url: block.image_url } : (block.image_url as Block | undefined);
      return typeof image?.url === "string" ? { type: "image_url", image_url: { ...image } } : null;
    }
    case "image": {
      const url = typeof block.url === "string" ? block.url : dataUrl(block);
      return url ? { type: "image_url", image_url: { url } } : null;
    }
    case "file": {
      const data = dataUrl(block);
      const filename = typeof block.filename === "string" ? { filename: block.filename } : {};
      if (data) return { type: "file", file: { file_data: data, ...filename } };
      const id = block.fileId ?? block.file_id;
      return typeof id === "string" ? { type: "file", file: { file_id: id } } : null;
    }
    default:
      return null;
  }
}

function content(message: BaseMessage): MessageInput["content"] {
  const value = message.content;
  if (typeof value === "string") return value;
  const parts = (value as Block[]).flatMap((block) => chatPart(block) ?? []);
  if (parts.length === 0) return "";
  return parts.length === 1 && parts[0].type === "text" ? String(parts[0].text) : parts;
}

/** The OpenAI chat message a LangChain message means, with the LangChain message kept in metadata. */
export function fromLangChain(message: BaseMessage): MessageInput {
  const [stored] = mapChatMessagesToStoredMessages([message]);
  const type = message.type as string;
  const role =
    type === "generic" ? toRole((message as BaseMessage & { role?: string }).role) : (ROLE_OF_TYPE[type] ?? "user");
  const chat: MessageInput = {
    role,
    content: content(message),
    metadata: { langchain: stored as unknown as Record<string, unknown> },
  };
  if (message.name) chat.name = message.name;
  if (message instanceof AIMessage && message.tool_calls?.length) {
    chat.tool_calls = message.tool_calls.map((call) => ({
      id: call.id ?? "",
      type: "function",
      function: { name: call.name, arguments: JSON.stringify(call.args) },
    }));
    if (chat.content === "") chat.content = null;
  }
  if (message instanceof ToolMessage) chat.tool_call_id = message.tool_call_id;
  return chat;
}

function toRole(role: string | undefined): Role {
  return role === "assistant" || role === "system" || role === "developer" || role === "tool" ? role : "user";
}

/** The LangChain message of a stored message: exactly the one stored, or built from the chat message. */
export function toLangChain(message: Message): BaseMessage {
  const stored = message.metadata?.langchain as StoredMessage | undefined;
  if (stored && typeof stored.type === "string") return mapStoredMessagesToChatMessages([stored])[0];
  const text = message.content ?? "";
  const fields = { content: text as string, ...(message.name ? { name: message.name } : {}) };
  switch (message.role) {
    case "assistant":
      return new AIMessage({
        ...fields,
        tool_calls: (message.tool_calls ?? []).map((call) => ({
          id: call.id,
          name: call.function.name,
          args: parseArguments(call.function.arguments),
          type: "tool_call" as const,
        })),
      });
    case "system":
    case "developer":
      return new SystemMessage(fields);
    case "tool":
      return new ToolMessage({ ...fields, tool_call_id: message.tool_call_id ?? "" });
    default:
      return new HumanMessage(fields);
  }
}

function parseArguments(text: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" ? value : { input: value };
  } catch {
    return { input: text };
  }
}

/** What a value handed in as a message is, for an error (its type, never its content). */
function kindOf(value: unknown): string {
  if (value === null || typeof value !== "object") return value === null ? "null" : typeof value;
  const role = (value as { role?: unknown }).role;
  return typeof role === "string" ? `an object with role ${JSON.stringify(role.slice(0, 40))}` : "a plain object";
}

/** @throws `invalid_message` naming the first value that is not a LangChain message; nothing is stored then. */
function checkedMessages(messages: unknown): BaseMessage[] {
  if (!Array.isArray(messages))
    throw new ThreadkeepError("invalid_message", "addMessages takes an array of LangChain messages", {
      details: { param: "messages" },
    });
  messages.forEach((m: unknown, i) => {
    if (!isBaseMessage(m)) {
      throw new ThreadkeepError(
        "invalid_message",
        `LangChain message ${i} is ${kindOf(m)}, not a LangChain message (HumanMessage, AIMessage, …)`,
        {
          details: { param: `messages[${i}]` },
        },
      );
    }
  });
  return messages;
}

/** A LangChain chat message history kept in a threadkeep session. */
export class ThreadkeepChatMessageHistory extends BaseListChatMessageHistory {
  lc_namespace = ["threadkeep", "langchain"];
  readonly memory: Memory;
  /** The threadkeep session id (the given id, or the one it maps to). */
  readonly sessionId: string;
  readonly userId: string;

  constructor(options: ThreadkeepChatMessageHistoryOptions) {
    super();
    this.memory = resolveMemory(options.memory);
    this.userId = options.userId ?? this.memory.settings.defaultUserId;
    this.sessionId = sessionIdFor(options.sessionId, this.userId);
  }

  async getMessages(): Promise<BaseMessage[]> {
    const messages = await orEmpty(() => this.memory.getMessages(this.sessionId, { userId: this.userId }), []);
    return messages.map(toLangChain);
  }

  async addMessage(message: BaseMessage): Promise<void> {
    await this.addMessages([message]);
  }

  /** Appends the messages in one atomic step (the whole turn, when LangChain hands it over at once). */
  override async addMessages(messages: BaseMessage[]): Promise<void> {
    await this.memory.addMessages(this.sessionId, checkedMessages(messages).map(fromLangChain), {
      userId: this.userId,
    });
  }

  override async clear(): Promise<void> {
    await orEmpty(() => this.memory.clear(this.sessionId, { userId: this.userId }), undefined);
  }
}

export { closeOpenedMemories } from "./_memory.js";
export type { MemoryOrUrl } from "./_memory.js";
