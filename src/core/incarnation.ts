/**
 * Writes meant for one incarnation of a session: the session as the caller read it, not another one
 * deleted and created again under its id meanwhile (a `clear`, an expiry and a new turn, another
 * import). Compaction's summaries and the copies of a session (`fork`, import, migrate) write this way.
 */
import { SessionNotFoundError } from "./errors.js";
import type { AppendOptions, Message, MessageInput, Session, SessionStore, Summary, SummaryInput } from "./types.js";

/** Throws `session_not_found` unless the stored session is still the one read (same `createdAt`). */
async function checkStillThere(store: SessionStore, session: Session): Promise<void> {
  if ((await store.getSession(session.id))?.createdAt !== session.createdAt) throw new SessionNotFoundError(session.id);
}

/**
 * Saves a summary made from `session` (as read before its messages) into that session only: with
 * `capabilities.guardedSummaries` the store refuses it in the save's own atomic step if the session
 * was deleted, or deleted and created again under its id, meanwhile; other stores get the session read
 * again just before the save (a narrower race, not closed).
 * @throws `session_not_found` when the session is gone or is another one now.
 */
export async function saveSummaryOf(store: SessionStore, session: Session, input: SummaryInput): Promise<Summary> {
  if (store.capabilities.guardedSummaries) return store.saveSummary(session.id, { ...input, sessionCreatedAt: session.createdAt });
  await checkStillThere(store, session);
  return store.saveSummary(session.id, input);
}

/**
 * Appends to `session` (as the caller read or created it) only: with `capabilities.guardedAppends`
 * the store refuses the append in its own atomic step if the session was deleted, or deleted and
 * created again under its id, meanwhile; other stores get the session read again just before the
 * append (a narrower race, not closed).
 * @throws `session_not_found` when the session is gone or is another one now.
 */
export async function appendMessagesOf(
  store: SessionStore,
  session: Session,
  messages: MessageInput[],
  options: AppendOptions = {},
): Promise<Message[]> {
  if (store.capabilities.guardedAppends) return store.appendMessages(session.id, messages, { ...options, sessionCreatedAt: session.createdAt });
  await checkStillThere(store, session);
  return store.appendMessages(session.id, messages, options);
}
