/** What a list of sessions shows about each one besides its record: a title and a message count. */
import { contentText } from "../../core/messages.js";
import type { Session, FullStore } from "../../core/types.js";

/** Longest title, in characters. */
const TITLE_LENGTH = 120;
/** Messages read from the start of a session to find its first user message. */
const TITLE_SCAN = 10;

/** A session with the overview a session list shows. */
export interface SessionOverview extends Session {
  /** The first stored user message, shortened to one line; null when there is none. */
  title: string | null;
  messageCount: number;
}

/**
 * Adds title and message count to sessions the caller already owns (they come from the owner's
 * listing, so no owner check is repeated). Two reads per session, all sessions at once.
 */
export async function sessionOverviews(store: FullStore, sessions: Session[]): Promise<SessionOverview[]> {
  return Promise.all(
    sessions.map(async (session) => {
      const [first, messageCount] = await Promise.all([
        store.getMessages(session.id, { limit: TITLE_SCAN }),
        store.countMessages(session.id),
      ]);
      const user = first.find((m) => m.role === "user");
      const text = user ? contentText(user.content).replace(/\s+/g, " ").trim() : "";
      const title = text.length > TITLE_LENGTH ? `${text.slice(0, TITLE_LENGTH - 1)}…` : text;
      return { ...session, title: title || null, messageCount };
    }),
  );
}
