/**
 * The record format of the file store: one JSON object per line, replayed in order to rebuild a
 * session (the rules of each record in file/_apply.ts, the replay of a file in file/_replay.ts).
 * Pure code (no filesystem), so the format can be read and tested in one place.
 */
import { ThreadkeepError } from "../../core/errors.js";
import type { Branch, Message, Session, SessionState, Summary } from "../../core/types.js";
import type { OperationRecord } from "../history.js";

/** The format version written in every session header. */
export const FILE_FORMAT_VERSION = 1;

/** The first line of a session file. */
export interface HeaderRecord {
  type: "session";
  v: number;
  id: string;
  userId: string;
  createdAt: number;
  lastActivityAt: number;
  metadata: Record<string, unknown>;
}

/** One line of a session file. `more` counts the lines that follow in the same atomic write. */
export type SessionRecord = { more?: number } & (
  | HeaderRecord
  | { type: "message"; message: Message }
  | ({ type: "summary" } & Summary)
  | { type: "state"; version: number; data: Record<string, unknown> }
  | { type: "pop"; seq: number }
  | { type: "truncate"; afterSeq: number }
  | { type: "trim"; beforeSeq: number }
  | { type: "touch"; at: number }
  | { type: "meta"; metadata: Record<string, unknown> }
  | ({ type: "op" } & OperationRecord)
  | { type: "branch"; branch: Branch }
  | { type: "reparent"; ids: number[]; parentId: number | null }
);

/** A session as replayed from its file. */
export interface SessionData {
  session: Session;
  messages: Message[];
  summaries: Summary[];
  nextSummaryId: number;
  state: SessionState;
  branches: Branch[];
  operations: OperationRecord[];
}

/** A line that could not be used, with enough to put it back by hand. */
export interface BadLine {
  line: number;
  reason: string;
  /** The line as written (absent when it is not valid UTF-8; see `base64`). */
  text?: string;
  base64?: string;
}

/** What replaying a session file gives. */
export interface Replay {
  /** Null when no session header could be found nor supplied. */
  data: SessionData | null;
  bad: BadLine[];
  /** Lines of the file that were applied. */
  records: number;
  /** The file should be rewritten from `data` (bad lines, a missing final newline, a lost header). */
  needsRewrite: boolean;
}

/**
 * Serialises records as complete lines, each ending in a newline. When `grouped` (an append), `more`
 * counts down to the last line so a write cut short by a crash can be recognised on replay; a rewrite
 * is atomic by rename and needs no count.
 * @throws `invalid_request` when a value cannot be written as JSON (e.g. a BigInt).
 */
export function encodeLines(records: SessionRecord[], grouped = true): string[] {
  try {
    return records.map((record, i) => {
      const more = grouped ? records.length - 1 - i : 0;
      const { type, more: _ignored, ...rest } = record;
      return `${JSON.stringify(more > 0 ? { type, more, ...rest } : { type, ...rest })}\n`;
    });
  } catch (error) {
    throw new ThreadkeepError("invalid_request", `Cannot store a value as JSON: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** The header record of a session. */
export function headerOf(session: Session): HeaderRecord {
  const { id, userId, createdAt, lastActivityAt, metadata } = session;
  return { type: "session", v: FILE_FORMAT_VERSION, id, userId, createdAt, lastActivityAt, metadata };
}

/** The fewest records that replay to `data`: what a compacted file holds. */
export function compactRecords(data: SessionData): SessionRecord[] {
  const records: SessionRecord[] = [headerOf(data.session)];
  for (const summary of data.summaries) records.push({ type: "summary", ...summary });
  if (data.state.version > 0) records.push({ type: "state", ...data.state });
  for (const message of data.messages) records.push({ type: "message", message });
  for (const branch of data.branches) records.push({ type: "branch", branch });
  for (const op of data.operations) records.push({ type: "op", ...op });
  // A message line moves the last activity to its own time; a later touch must survive that.
  const last = data.messages.at(-1);
  if (last && last.createdAt !== data.session.lastActivityAt) {
    records.push({ type: "touch", at: data.session.lastActivityAt });
  }
  return records;
}

/** Lines that replay to live state: what compaction keeps; the rest of a file is dead. */
export function liveRecordCount(data: SessionData): number {
  const history = data.branches.length + data.operations.length;
  return 1 + data.summaries.length + (data.state.version > 0 ? 1 : 0) + data.messages.length + history;
}

/** An empty session around a header. */
export function emptyData(session: Session): SessionData {
  return {
    session,
    messages: [],
    summaries: [],
    nextSummaryId: 1,
    state: { version: 0, data: {} },
    branches: [],
    operations: [],
  };
}
