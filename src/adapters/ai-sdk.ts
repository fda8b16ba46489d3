/**
 * `threadkeep/ai-sdk`: chat persistence for AI SDK UI (`useChat`): load a chat's `UIMessage[]`, save it
 * after each response, list and delete chats. `saveChat` stores only what changed; a regenerated answer
 * or an edited message replaces the tail atomically and keeps what it replaced as a branch. Messages are
 * checked with the AI SDK's own `validateUIMessages` and kept as JSON, as the SDK's persistence guide
 * keeps them. `ai` is an optional peer dependency.
 */
import type { UIMessage } from "ai";
import type { Memory } from "../core/memory/memory.js";
import type { Session } from "../core/types.js";
import { type MemoryOrUrl, orEmpty, resolveMemory, sessionIdFor } from "./_memory.js";
import { sameData } from "../transfer/canonical.js";
import { checkUIMessages, messagesToUI, type StoredUIMessage, uiMessageCopies, uiToMessages } from "./_ui-messages.js";

/** Options of {@link createChatStore}. */
export interface ChatStoreOptions {
  /** A `Memory`, or a store URL opened for you (one `Memory` per URL in the process). */
  memory: MemoryOrUrl;
  /** The owner of the chats. @default the memory's default user */
  userId?: string;
}

/** A chat as {@link ChatStore.listChats} lists it. */
export interface ChatSummary {
  /** The AI SDK chat id. */
  id: string;
  /** The threadkeep session id that keeps it. */
  sessionId: string;
  title?: string;
  createdAt: number;
  lastActivityAt: number;
}

/** Chat persistence for AI SDK UI. */
export interface ChatStore {
  /** The chat's messages (`[]` for a chat never saved). */
  loadChat(chatId: string): Promise<UIMessage[]>;
  /**
   * Saves the chat as `messages`: new messages are appended; a changed message (regenerate, edit)
   * replaces the stored ones from there on, which are kept as a branch. Nothing is written when nothing changed.
   */
  saveChat(chat: { chatId: string; messages: UIMessage[] }): Promise<void>;
  /** The user's chats, most recently active first. */
  listChats(options?: { limit?: number }): Promise<ChatSummary[]>;
  /** Deletes a chat; `false` when there was none. */
  deleteChat(chatId: string): Promise<boolean>;
}

/** The session metadata key holding the AI SDK chat id. */
const CHAT_ID_KEY = "aiSdkChatId";

/**
 * Creates the chat store of one user.
 * @example
 * ```ts
 * import { createChatStore } from "threadkeep/ai-sdk";
 *
 * const chats = createChatStore({ memory: "sqlite:./data/threadkeep.db", userId: "alice" });
 * await chats.saveChat({ chatId: "chat-1", messages });
 * ```
 */
export function createChatStore(options: ChatStoreOptions): ChatStore {
  const memory: Memory = resolveMemory(options.memory);
  const userId = options.userId ?? memory.settings.defaultUserId;
  const owner = { userId };
  const idOf = (chatId: string) => sessionIdFor(chatId, userId);

  const stored = async (sessionId: string): Promise<{ ui: StoredUIMessage[]; lastSeq: number }> => {
    const messages = await orEmpty(() => memory.getMessages(sessionId, owner), []);
    return { ui: messagesToUI(messages), lastSeq: messages.at(-1)?.seq ?? 0 };
  };

  return {
    async loadChat(chatId) {
      return (await stored(idOf(chatId))).ui.map((s) => s.message);
    },

    async saveChat({ chatId, messages: given }) {
      const sessionId = idOf(chatId);
      const messages = uiMessageCopies(given);
      const { ui, lastSeq } = await stored(sessionId);
      let same_ = 0;
      while (same_ < ui.length && same_ < messages.length && sameData(ui[same_].message, messages[same_])) same_++;
      // What is stored already was checked when it was saved; the rest is checked before anything is written.
      await checkUIMessages(messages, same_);
      if (ui.length === 0 && lastSeq === 0)
        await memory.startSession({ ...owner, id: sessionId, metadata: { [CHAT_ID_KEY]: chatId } });
      const added = messages.slice(same_).flatMap(uiToMessages);
      if (same_ === ui.length) {
        if (added.length) await memory.addMessages(sessionId, added, owner);
        return;
      }
      const changed = ui[same_];
      const next = messages[same_];
      // The answer being written (same id, at the end) is updated; any other change supersedes a branch.
      const update =
        next !== undefined && next.id === changed.message.id && next.role === "assistant" && same_ === ui.length - 1;
      const reason =
        changed.message.role === "assistant" && (next === undefined || next.role === "assistant")
          ? "regenerate"
          : "edit";
      await memory.replaceAfter(sessionId, changed.seq - 1, added, {
        ...owner,
        expectedLastSeq: lastSeq,
        ...(update ? {} : { branch: { reason, metadata: { uiMessageId: changed.message.id } } }),
      });
    },

    async listChats({ limit = 50 } = {}) {
      const page = await memory.listSessions({ ...owner, limit });
      return page.sessions.flatMap((s: Session) => {
        const id = s.metadata[CHAT_ID_KEY];
        if (typeof id !== "string") return [];
        const title = typeof s.metadata.title === "string" ? s.metadata.title : undefined;
        return [
          {
            id,
            sessionId: s.id,
            ...(title ? { title } : {}),
            createdAt: s.createdAt,
            lastActivityAt: s.lastActivityAt,
          },
        ];
      });
    },

    async deleteChat(chatId) {
      try {
        await memory.deleteSession(idOf(chatId), owner);
        return true;
      } catch (error) {
        return orEmpty(() => Promise.reject(error), false);
      }
    },
  };
}

export { closeOpenedMemories } from "./_memory.js";
export type { MemoryOrUrl } from "./_memory.js";
