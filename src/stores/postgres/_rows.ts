/** The PostgreSQL store's row formats and their mapping to the contract's types. */
import type { Message, MessageInput, Session, Summary } from "../../core/types.js";

/** A `messages` row as the store reads it. */
export interface MessageRow {
  seq: number;
  created_at: number;
  body: string;
}

/** A `sessions` row as the store reads it. */
export interface SessionRow {
  id: string;
  user_id: string;
  created_at: number;
  last_activity_at: number;
  metadata: string;
}

/** A `summaries` row as the store reads it. */
export interface SummaryRow {
  id: number;
  from_seq: number;
  to_seq: number;
  created_at: number;
  content: string;
  metadata: string | null;
}

/** The session of a row. */
export const toSession = (row: SessionRow): Session => ({
  id: row.id,
  userId: row.user_id,
  createdAt: row.created_at,
  lastActivityAt: row.last_activity_at,
  metadata: JSON.parse(row.metadata),
});

/** A fresh object per read; the body never holds seq or createdAt (see {@link bodyOf}). */
export function toMessage(row: MessageRow): Message {
  const message = JSON.parse(row.body) as Message;
  message.seq = row.seq;
  message.createdAt = row.created_at;
  return message;
}

/** The summary of a row. */
export const toSummary = (row: SummaryRow): Summary => ({
  id: row.id,
  fromSeq: row.from_seq,
  toSeq: row.to_seq,
  content: row.content,
  createdAt: row.created_at,
  ...(row.metadata === null ? {} : { metadata: JSON.parse(row.metadata) }),
});

/**
 * The message as stored: its JSON without the store's bookkeeping. A new message has none, and is
 * written as it is: the copy without `seq` and `createdAt` (an object rest) costs more than the JSON.
 */
export function bodyOf(message: MessageInput): string {
  const { seq, createdAt } = message as Partial<Message>;
  if (seq === undefined && createdAt === undefined) return JSON.stringify(message);
  const { seq: _seq, createdAt: _createdAt, ...rest } = message as Partial<Message>;
  return JSON.stringify(rest);
}

/** Lower-cased as the other stores compare; U+0000 dropped because PostgreSQL text cannot hold it. */
export const searchable = (text: string) => text.toLowerCase().replaceAll("\u0000", "");

/** A time for a `bigint` column: whole milliseconds, or null for "now". */
export const ms = (at: number | undefined) => (at === undefined ? null : Math.round(at));
