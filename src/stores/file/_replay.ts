/**
 * Replays a session file line by line: parses each line, checks the header and applies the records,
 * keeping lines that cannot be used (with the reason) rather than dropping them.
 */
import { ThreadkeepError } from "../../core/errors.js";
import type { Session } from "../../core/types.js";
import { applyRecord, isInt, isObject, recordProblem } from "./_apply.js";
import {
  type BadLine,
  emptyData,
  FILE_FORMAT_VERSION,
  type Replay,
  type SessionData,
  type SessionRecord,
} from "./_records.js";

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
    if (!isObject(value) || typeof value.type !== "string") return { line, bytes, error: "not a record with a type" };
    if (value.more !== undefined && (!isInt(value.more) || value.more < 0)) return { line, bytes, error: "bad more" };
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
