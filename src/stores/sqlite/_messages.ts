import { isThreadkeepError } from "../../core/errors.js";
import type { FullStore, Message, MessageInput, MessageQuery } from "../../core/types.js";
import type { SqliteConnection } from "./_connection.js";
import type { SqliteStoreDb } from "./_db.js";
import type { EncodedMessage } from "./_rows.js";
import { seqBounds } from "../_util.js";

/** Messages as stored rows: their JSON (the full-text indexer reads the text from it). */
export const encodeMessages = (valid: MessageInput[]) =>
  valid.map((input): EncodedMessage => {
    // The store assigns seq and createdAt; an input that carries them (a re-import) does not keep them.
    // Only such an input is copied without them: a copy of every message costs an append about a microsecond.
    if (!("seq" in input) && !("createdAt" in input)) return JSON.stringify(input);
    const { seq: _seq, createdAt: _createdAt, ...stored } = input as Partial<Message> & MessageInput;
    return JSON.stringify(stored);
  });

/** A session's messages that `query` selects (the newest `last`, or a seq range), oldest first. */
export function readMessages(db: SqliteStoreDb, id: string, query: MessageQuery): Message[] {
  const { owner } = query;
  const [from, to] = seqBounds(query);
  const bounded = from !== Number.MIN_SAFE_INTEGER || to !== Number.MAX_SAFE_INTEGER;
  if (owner && query.last !== undefined && query.last > 0 && !bounded) {
    // The context window, owner-scoped: one statement; only an empty answer needs the owner read.
    const rows = db.st.newestOwned(
      id,
      owner.userId,
      owner.activeSince ?? Number.MIN_SAFE_INTEGER,
      Math.floor(query.last),
    );
    if (rows && rows.length > 0) return db.messages(id, rows.reverse());
  }
  if (owner) db.exists(id, owner);
  if (query.last !== undefined) {
    if (query.last <= 0) return [];
    const count = Math.floor(query.last);
    const rows = bounded ? db.st.rangeNewestFirst.all(id, from, to, count) : db.st.newest(id, count);
    return db.messages(id, rows.reverse());
  }
  const limit = query.limit === undefined ? -1 : Math.max(0, Math.floor(query.limit));
  return db.messages(id, db.st.rangeOldestFirst.all(id, from, to, limit));
}

/** The message methods of the store that read or cut a session's messages (appends are the store's own). */
export function messageReads({
  use,
}: SqliteConnection): Pick<
  FullStore,
  "getMessages" | "getMessageRanges" | "countMessages" | "popMessage" | "truncateAfter"
> {
  return {
    async getMessages(id: string, query: MessageQuery = {}) {
      return use((db) => readMessages(db, id, query));
    },

    // Every range in one synchronous pass over the database (no await between them).
    async getMessageRanges(ranges, owner) {
      return use((db) =>
        ranges.map(({ sessionId, fromSeq, toSeq }) => {
          try {
            return readMessages(db, sessionId, { fromSeq, toSeq, owner });
          } catch (error) {
            if (isThreadkeepError(error, "session_not_found")) return [];
            throw error;
          }
        }),
      );
    },

    async countMessages(id) {
      return use(({ st }) => st.countMessages.get(id)!.n);
    },

    async popMessage(id) {
      return use((db) => db.tx.pop(id));
    },

    async truncateAfter(id, seq) {
      return use((db) => db.tx.truncate(id, seq));
    },
  };
}
