/**
 * The record format of the file store: one JSON object per line, replayed in order to rebuild a
 * session. Pure code (no filesystem), so the replay rules can be read and tested in one place.
 */
import { ThreadkeepError } from "../core/errors.js";
import { validateMessage } from "../core/messages.js";
import type { Branch, Message, Session, SessionState, Summary } from "../core/types.js";
import { type OperationRecord, rememberOperation, reparent, upsertBranch } from "./_history.js";

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

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const isInt = (v: unknown): v is number => Number.isSafeInteger(v);
const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

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
    throw new ThreadkeepError(
      "invalid_request",
      `Cannot store a value as JSON: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
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
  return { session, messages: [], summaries: [], nextSummaryId: 1, state: { version: 0, data: {} }, branches: [], operations: [] };
}

/**
 * What is wrong with a record on its own (the same rules when writing and when replaying, so a line
 * that was written always replays), or null.
 */
export function recordProblem(record: SessionRecord): string | null {
  switch (record.type) {
    case "session": {
      const { id, userId, createdAt, lastActivityAt, metadata } = record;
      const ok = typeof id === "string" && typeof userId === "string" && isObject(metadata);
      return ok && isNumber(createdAt) && isNumber(lastActivityAt)
        ? null
        : "session header needs id, userId, createdAt, lastActivityAt and metadata";
    }
    case "message": {
      const m = record.message;
      if (!isObject(m) || !isInt(m.seq) || m.seq < 1 || !isNumber(m.createdAt)) {
        return "message needs a positive integer seq and a createdAt";
      }
      try {
        validateMessage(m);
        return null;
      } catch (error) {
        return (error as Error).message;
      }
    }
    case "summary": {
      const { id, fromSeq, toSeq, content, createdAt, metadata } = record;
      const ok = isInt(id) && isNumber(fromSeq) && isNumber(toSeq) && isNumber(createdAt);
      if (!ok || typeof content !== "string")
        return "summary needs id, fromSeq, toSeq, content and createdAt";
      return metadata === undefined || isObject(metadata) ? null : "summary metadata must be an object";
    }
    case "state":
      return isInt(record.version) && record.version >= 0 && isObject(record.data)
        ? null
        : "state needs a version and an object of data";
    case "pop":
      return isNumber(record.seq) ? null : "pop needs a seq";
    case "truncate":
      return isNumber(record.afterSeq) ? null : "truncate needs a numeric afterSeq";
    case "trim":
      return isNumber(record.beforeSeq) ? null : "trim needs a beforeSeq";
    case "touch":
      return isNumber(record.at) ? null : "touch needs a numeric time";
    case "meta":
      return isObject(record.metadata) ? null : "metadata must be an object";
    case "op": {
      const { id, digest, fromSeq, toSeq, at } = record;
      const ok = typeof id === "string" && typeof digest === "string" && isInt(fromSeq) && isInt(toSeq);
      return ok && isNumber(at) ? null : "op needs id, digest, fromSeq, toSeq and at";
    }
    case "branch": {
      const b = record.branch;
      const ok = isObject(b) && isInt(b.id) && isInt(b.atSeq) && (b.parentId === null || isInt(b.parentId));
      return ok && typeof b.reason === "string" && isNumber(b.createdAt) && Array.isArray(b.messages)
        ? null
        : "branch needs id, atSeq, parentId, reason, createdAt and messages";
    }
    case "reparent":
      return Array.isArray(record.ids) && record.ids.every(isInt) && (record.parentId === null || isInt(record.parentId))
        ? null
        : "reparent needs ids and a parentId";
    default:
      return `unknown record type ${JSON.stringify((record as { type: unknown }).type)}`;
  }
}

/** Applies one record after the header. @returns why it was refused, or null. */
export function applyRecord(data: SessionData, record: SessionRecord): string | null {
  const problem = recordProblem(record);
  if (problem) return problem;
  const { messages } = data;
  switch (record.type) {
    case "session":
      return "a second session header";
    case "message": {
      const last = messages.at(-1)?.seq ?? 0;
      if (record.message.seq <= last) return `message seq ${record.message.seq} does not follow seq ${last}`;
      messages.push(record.message);
      data.session.lastActivityAt = record.message.createdAt;
      return null;
    }
    case "summary": {
      const { type: _type, more: _more, ...summary } = record;
      data.summaries.push(summary);
      data.summaries.sort((a, b) => a.fromSeq - b.fromSeq || a.id - b.id);
      data.nextSummaryId = Math.max(data.nextSummaryId, summary.id + 1);
      return null;
    }
    case "state":
      data.state = { version: record.version, data: record.data };
      return null;
    case "pop":
      // Popping by seq rather than "the last one" stays right when that message was quarantined.
      while ((messages.at(-1)?.seq ?? 0) >= record.seq) messages.pop();
      return null;
    case "truncate":
      while ((messages.at(-1)?.seq ?? 0) > record.afterSeq) messages.pop();
      return null;
    case "trim": {
      const keepFrom = messages.findIndex((m) => m.seq >= record.beforeSeq);
      messages.splice(0, keepFrom < 0 ? messages.length : keepFrom);
      return null;
    }
    case "touch":
      data.session.lastActivityAt = record.at;
      return null;
    case "meta":
      data.session.metadata = record.metadata;
      return null;
    case "op": {
      const { type: _type, more: _more, ...op } = record;
      rememberOperation(data.operations, op);
      return null;
    }
    case "branch":
      upsertBranch(data.branches, record.branch);
      return null;
    case "reparent":
      reparent(data.branches, record.ids, record.parentId);
      return null;
  }
}

interface Parsed {
  line: number;
  bytes: Buffer;
  record?: SessionRecord;
  error?: string;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

// Space, tab, CR: a blank line carries no data (an editor may leave one); checked without copying the line.
const isBlank = (bytes: Buffer) => bytes.every((b) => b === 0x20 || b === 0x09 || b === 0x0d);

function parseLine(line: number, bytes: Buffer): Parsed {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { line, bytes, error: "not valid UTF-8" };
  }
  try {
    const value: unknown = JSON.parse(text);
    if (!isObject(value) || typeof value.type !== "string")
      return { line, bytes, error: "not a record with a type" };
    if (value.more !== undefined && (!isInt(value.more) || value.more < 0))
      return { line, bytes, error: "bad more" };
    return { line, bytes, record: value as SessionRecord };
  } catch (error) {
    return { line, bytes, error: `torn or invalid JSON (${(error as Error).message})` };
  }
}

function badLine(p: Parsed, reason: string): BadLine {
  try {
    return { line: p.line, reason, text: utf8.decode(p.bytes) };
  } catch {
    return { line: p.line, reason, base64: p.bytes.toString("base64") };
  }
}

function headerSession(record: SessionRecord, key: string): Session | string {
  if (record.type !== "session") return "the first record is not a session header";
  if (isInt(record.v) && record.v > FILE_FORMAT_VERSION) {
    throw new ThreadkeepError(
      "schema_version_unsupported",
      `Session file ${key}.jsonl has format ${record.v}; this threadkeep reads up to ${FILE_FORMAT_VERSION}`,
    );
  }
  const problem = recordProblem(record);
  if (problem) return problem;
  if (record.id.toLowerCase() !== key) return "session header for another id";
  const { id, userId, createdAt, lastActivityAt, metadata } = record;
  return { id, userId, createdAt, lastActivityAt, metadata };
}

/**
 * Replays a session file. Lines that cannot be used are returned in `bad`, never dropped silently;
 * the trailing lines of a write that a crash cut short are bad as a whole, so a batch stays all or none.
 * `fallback` (the index's copy of the session) stands in for a lost header.
 * @throws `schema_version_unsupported` for a file written by a newer format.
 */
export function replaySession(key: string, content: Buffer, fallback?: Session): Replay {
  const parsed: Parsed[] = [];
  let start = 0;
  let line = 0;
  while (start < content.length) {
    const end = content.indexOf(10, start);
    const stop = end < 0 ? content.length : end;
    line++;
    const bytes = content.subarray(start, stop);
    if (!isBlank(bytes)) parsed.push(parseLine(line, bytes));
    start = stop + 1;
  }
  const bad = new Map<Parsed, string>();
  for (const p of parsed) if (p.error) bad.set(p, p.error);

  // A complete write ends with a record without `more`; a valid tail that still expects lines was cut short.
  const valid = parsed.filter((p) => p.record);
  let i = valid.length - 1;
  if (i >= 0 && (valid[i].record!.more ?? 0) > 0) {
    let expected = valid[i].record!.more!;
    while (i >= 0 && (valid[i].record!.more ?? 0) === expected) {
      bad.set(valid[i], "part of a write cut short at the end of the file");
      i--;
      expected++;
    }
  }

  let data: SessionData | null = null;
  let records = 0;
  let lostHeader = false;
  for (const p of parsed) {
    if (bad.has(p)) continue;
    const record = p.record!;
    if (!data) {
      const session = headerSession(record, key);
      if (typeof session !== "string") {
        data = emptyData(session);
        records++;
        continue;
      }
      if (!fallback) {
        bad.set(p, session);
        continue;
      }
      data = emptyData(structuredClone(fallback));
      lostHeader = true;
    }
    const refused = applyRecord(data, record);
    if (refused) bad.set(p, refused);
    else records++;
  }
  if (!data && fallback) {
    data = emptyData(structuredClone(fallback));
    lostHeader = true;
  }
  const badLines = parsed.filter((p) => bad.has(p)).map((p) => badLine(p, bad.get(p)!));
  const unterminated = content.length > 0 && content[content.length - 1] !== 10;
  return { data, bad: badLines, records, needsRewrite: badLines.length > 0 || unterminated || lostHeader };
}
