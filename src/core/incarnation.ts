/**
 * Writes meant for one incarnation of a session: the session as the caller read it, not another one
 * deleted and created again under its id meanwhile (a `clear`, an expiry and a new turn, another
 * import). Compaction's summaries and the copies of a session (`fork`, import, migrate) write this way.
 */
import type { AppendOptions, Message, MessageInput, Session, FullStore, Summary, SummaryInput } from "./types.js";

/**
 * Saves a summary made from `session` (as read before its messages) into that session only: the store
 * refuses it in the save's own atomic step if the session was deleted, or deleted and created again
 * under its id, meanwhile (part of the summaries' contract).
 * @throws `session_not_found` when the session is gone or is another one now.
 */
export async function saveSummaryOf(store: FullStore, session: Session, input: SummaryInput): Promise<Summary> {
  return store.saveSummary(session.id, { ...input, sessionCreatedAt: session.createdAt });
}

/**
 * Appends to `session` (as the caller read or created it) only: the append is refused if the session
 * was deleted, or deleted and created again under its id, meanwhile — in the write's own step where
 * the store guards appends (`capabilities.guardedAppends`), else by `completeStore` re-reading it first.
 * @throws `session_not_found` when the session is gone or is another one now.
 */
export async function appendMessagesOf(
  store: FullStore,
  session: Session,
  messages: MessageInput[],
  options: AppendOptions = {},
): Promise<Message[]> {
  return store.appendMessages(session.id, messages, { ...options, sessionCreatedAt: session.createdAt });
}
