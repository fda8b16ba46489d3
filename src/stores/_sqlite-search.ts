import type { SearchHit, SearchQuery } from "../core/types.js";
import type { SqliteStoreDb } from "./_sqlite-db.js";
import { scopedMatch } from "./_sqlite-fulltext.js";
import type { MessageRow } from "./_sqlite-statements.js";
import { messageText, snippetOf } from "./_util.js";

const hits = (db: SqliteStoreDb, rows: MessageRow[], needle: (text: string) => string): SearchHit[] =>
  rows.flatMap((row) => {
    const sessionId = row[3]!;
    return db.messages(sessionId, [row]).map((message) => {
      const text = messageText(message);
      return { sessionId, seq: message.seq, snippet: snippetOf(text, needle(text)), message };
    });
  });

/** A checked search, its limit settled: full-text (indexing the queued text first) or substring. */
export function searchMessages(db: SqliteStoreDb, query: SearchQuery, limit: number): SearchHit[] {
  const { userId, sessionId } = query;
  const { st } = db;
  if (query.mode === "fulltext") {
    db.tx.indexPending();
    const ranked = query.ranking === "relevance";
    const match = scopedMatch(query.text, query, ranked);
    // Nothing but separators: no word to find.
    if (!match) return [];
    const rows = ranked
      ? sessionId
        ? st.searchFullTextRankedInSession.all(match, sessionId, userId, limit)
        : st.searchFullTextRanked.all(match, userId, limit)
      : sessionId
        ? st.searchFullTextInSession.all(match, sessionId, userId, limit)
        : st.searchFullText.all(match, userId, limit);
    const words = query.text.toLowerCase().trim().split(/\s+/);
    return hits(db, rows, (text) => words.find((w) => text.toLowerCase().includes(w)) ?? "");
  }
  const needle = query.text.toLowerCase();
  const rows = sessionId
    ? st.searchSubstringInSession.all(sessionId, userId, needle, limit)
    : st.searchSubstring.all(userId, needle, limit);
  return hits(db, rows, () => query.text);
}
