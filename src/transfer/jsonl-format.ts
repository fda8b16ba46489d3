/**
 * The threadkeep export format (JSONL, documented in docs/cli.md): one header line, then per session
 * its `session` line followed by its `message`, `summary`, `state` and `branch` lines, then the
 * users' `memory` lines (version 2). Seqs and times are the original ones, so an export of a store
 * that imported this file reads the same as the file. Version 1 files (no `memory` lines) read as they are.
 */
import { setImmediate as nextTask } from "node:timers/promises";
import { z } from "zod";
import { isValidSessionId } from "../core/ids.js";
import { validateMessage } from "../core/messages.js";
import { BRANCH_REASONS, type Branch, type Message, type Session, type UserMemory } from "../core/types.js";
import { sortedData } from "./canonical.js";

/**
 * Version written in the header; a newer file is refused rather than half understood. 1: sessions,
 * messages, summaries, state, branches. 2: and `memory` records (memories about users, with history).
 */
export const EXPORT_FORMAT_VERSION = 2;
/** The header's `type`. */
export const EXPORT_HEADER_TYPE = "threadkeep-export";

/** A summary as exported: its original seq range, without the store-assigned id. */
export interface ExportedSummary {
  fromSeq: number;
  toSeq: number;
  content: string;
  createdAt: number;
  metadata?: Record<string, unknown>;
}

/** Everything of one session, in original numbering: the unit of export, import and migration. */
export interface SessionBundle {
  session: Session;
  /** Oldest first, contiguous seqs (the first may be above 1 when older ones were trimmed). */
  messages: Message[];
  /** Ordered by `fromSeq`. */
  summaries: ExportedSummary[];
  /** The state's data, or null when it was never written. Versions are not carried over. */
  state: Record<string, unknown> | null;
  /** Branches (superseded messages kept), by id, in original numbering. */
  branches?: Branch[];
}

/** A problem found while reading an export, with the 1-based line it is on. */
export interface FormatProblem {
  line: number;
  /** The last line of a run of lines with the same problem. */
  toLine?: number;
  message: string;
  /** The session the problem made unimportable, when known. */
  sessionId?: string;
}

/** What {@link readExport} yields: a complete session, a memory about a user, or a problem. */
export type ExportItem =
  | { kind: "bundle"; bundle: SessionBundle; line: number }
  | { kind: "memory"; memory: UserMemory; line: number }
  | { kind: "problem"; problem: FormatProblem };

/** A message in the exported shape: bookkeeping first, optional fields only when they say something. */
export function exportedMessage(message: Message): Message {
  const { seq, createdAt, role, content, metadata, incomplete, ...rest } = message;
  const out: Record<string, unknown> = { seq, createdAt, role, content, ...(sortedData(rest) as object) };
  if (incomplete === true) out.incomplete = true;
  if (metadata && Object.keys(metadata).length > 0) out.metadata = sortedData(metadata);
  return out as Message;
}

/** The JSONL lines of one session (without trailing newlines). */
export function bundleLines(bundle: SessionBundle): string[] {
  const { id, userId, createdAt, lastActivityAt, metadata } = bundle.session;
  const sessionId = id;
  const lines = [
    JSON.stringify({
      type: "session",
      session: { id, userId, createdAt, lastActivityAt, metadata: sortedData(metadata ?? {}) },
    }),
  ];
  for (const message of bundle.messages)
    lines.push(JSON.stringify({ type: "message", sessionId, message: exportedMessage(message) }));
  for (const s of bundle.summaries) {
    const summary = {
      fromSeq: s.fromSeq,
      toSeq: s.toSeq,
      content: s.content,
      createdAt: s.createdAt,
      metadata: s.metadata && sortedData(s.metadata),
    };
    lines.push(JSON.stringify({ type: "summary", sessionId, summary }));
  }
  if (bundle.state) lines.push(JSON.stringify({ type: "state", sessionId, data: sortedData(bundle.state) }));
  for (const branch of bundle.branches ?? []) {
    const messages = branch.messages.map(exportedMessage);
    lines.push(JSON.stringify({ type: "branch", sessionId, branch: { ...(sortedData(branch) as object), messages } }));
  }
  return lines;
}

/** The JSONL line of a memory about a user (with its history; `sessionDeleted` is never stored). */
export function memoryLine(memory: UserMemory): string {
  const { id, userId, text, createdAt, updatedAt, source, metadata, history } = memory;
  const { sessionDeleted: _derived, ...storedSource } = source as UserMemory["source"] & { sessionDeleted?: boolean };
  return JSON.stringify({
    type: "memory",
    memory: {
      id,
      userId,
      text,
      createdAt,
      updatedAt,
      source: sortedData(storedSource),
      metadata: sortedData(metadata ?? {}),
      history: history.map(sortedData),
    },
  });
}

/** The header line. */
export function headerLine(): string {
  return JSON.stringify({ type: EXPORT_HEADER_TYPE, version: EXPORT_FORMAT_VERSION });
}

const time = z.number().int().nonnegative();
const object = z.record(z.string(), z.unknown());
const sessionIdField = z
  .string()
  .refine(isValidSessionId, "not a valid session id (a UUID or user_{uuid}_conv_{uuid})");
const RECORD = z.discriminatedUnion("type", [
  z.object({ type: z.literal(EXPORT_HEADER_TYPE), version: z.number().int() }),
  z.object({
    type: z.literal("session"),
    session: z.object({
      id: sessionIdField,
      userId: z.string().min(1),
      createdAt: time,
      lastActivityAt: time,
      metadata: object.optional(),
    }),
  }),
  z.object({
    type: z.literal("message"),
    sessionId: sessionIdField,
    message: z.looseObject({ seq: z.number().int().positive(), createdAt: time }),
  }),
  z.object({
    type: z.literal("summary"),
    sessionId: sessionIdField,
    summary: z.object({
      fromSeq: z.number().int(),
      toSeq: z.number().int(),
      content: z.string(),
      createdAt: time,
      metadata: object.optional(),
    }),
  }),
  z.object({ type: z.literal("state"), sessionId: sessionIdField, data: object }),
  z.object({
    type: z.literal("memory"),
    memory: z.object({
      id: z.string().min(1),
      userId: z.string().min(1),
      text: z.string(),
      createdAt: time,
      updatedAt: time,
      source: z.discriminatedUnion("kind", [
        z.object({ kind: z.literal("hand") }),
        z.object({
          kind: z.literal("session"),
          sessionId: z.string().min(1),
          seqs: z.array(z.number().int().positive()),
        }),
      ]),
      metadata: object.optional(),
      history: z.array(z.object({ text: z.string(), replacedAt: time, reason: z.string().optional() })),
    }),
  }),
  z.object({
    type: z.literal("branch"),
    sessionId: sessionIdField,
    branch: z.object({
      id: z.number().int().positive(),
      atSeq: z.number().int().nonnegative(),
      parentId: z.number().int().positive().nullable(),
      reason: z.enum(BRANCH_REASONS as [Branch["reason"], ...Branch["reason"][]]),
      createdAt: time,
      metadata: object.optional(),
      messages: z.array(z.looseObject({ seq: z.number().int().positive(), createdAt: time })),
    }),
  }),
]);
type ExportRecord = z.infer<typeof RECORD>;

/** Parses one line into a record. @returns the record, or the reason it is not one. */
export function parseRecord(text: string): ExportRecord | string {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return `malformed JSON (${(error as Error).message})`;
  }
  const parsed = RECORD.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue.path.length > 0 ? `${issue.path.join(".")}: ` : "";
    return `not a threadkeep export record (${where}${issue.message})`;
  }
  if (parsed.data.type === "message") {
    try {
      validateMessage(parsed.data.message);
    } catch (error) {
      return `invalid message (${(error as Error).message.replace(/^messages\[0\]\./, "")})`;
    }
  }
  return parsed.data;
}

interface Block {
  bundle: SessionBundle;
  line: number;
  problems: FormatProblem[];
}

/**
 * Reads an export line by line and yields each session once its block is complete. A session
 * with any bad line is not yielded (its problems are), so a session is imported whole or not at all.
 */
export async function* readExport(lines: AsyncIterable<string> | Iterable<string>): AsyncGenerator<ExportItem> {
  const seen = new Set<string>();
  const seenMemories = new Set<string>();
  let block: Block | null = null;
  let lineNo = 0;
  let sawContent = false;

  function* flush(): Generator<ExportItem> {
    if (!block) return;
    if (block.problems.length === 0) yield { kind: "bundle", bundle: block.bundle, line: block.line };
    else for (const problem of block.problems) yield { kind: "problem", problem };
    block = null;
  }
  const problem = (message: string): ExportItem | null => {
    const found: FormatProblem = { line: lineNo, message, sessionId: block?.bundle.session.id };
    if (block) {
      // A run of lines with the same fault is one problem (e.g. a session whose session line is broken).
      const last = block.problems.at(-1);
      if (last && last.message === message && (last.toLine ?? last.line) === lineNo - 1) last.toLine = lineNo;
      else block.problems.push(found);
      return null;
    }
    return { kind: "problem", problem: found };
  };

  for await (const raw of lines) {
    lineNo++;
    // Lines already in memory (an array, or a stream's chunk) settle at once: the event loop runs every
    // 1,000 lines, or a session of 12,000 messages is read and checked in one go (~150 ms, an import).
    if (lineNo % 1000 === 0) await nextTask();
    const text = raw.trim();
    if (text === "") continue;
    const first = !sawContent;
    sawContent = true;
    const record = parseRecord(text);
    if (typeof record === "string") {
      const item = problem(record);
      if (item) yield item;
      continue;
    }
    if (record.type === EXPORT_HEADER_TYPE) {
      const message = !first
        ? "a header line is only allowed as the first line"
        : record.version > EXPORT_FORMAT_VERSION
          ? `export format version ${record.version} is newer than this threadkeep understands (${EXPORT_FORMAT_VERSION})`
          : null;
      const item = message ? problem(message) : null;
      if (item) yield item;
      continue;
    }
    if (record.type === "session") {
      yield* flush();
      const { id, userId, createdAt, lastActivityAt, metadata } = record.session;
      const sessionId = id.toLowerCase();
      block = {
        bundle: {
          session: { id: sessionId, userId, createdAt, lastActivityAt, metadata: metadata ?? {} },
          messages: [],
          summaries: [],
          state: null,
        },
        line: lineNo,
        problems: [],
      };
      if (seen.has(sessionId))
        block.problems.push({
          line: lineNo,
          message: `session ${sessionId} appears twice in the file`,
          sessionId,
        });
      seen.add(sessionId);
      continue;
    }
    if (record.type === "memory") {
      // Memories belong to users, not sessions: one ends the session block before it.
      yield* flush();
      const memory: UserMemory = { ...record.memory, metadata: record.memory.metadata ?? {} };
      const key = JSON.stringify([memory.userId, memory.id]);
      if (seenMemories.has(key)) {
        yield {
          kind: "problem",
          problem: { line: lineNo, message: `memory ${memory.id} of user ${memory.userId} appears twice in the file` },
        };
        continue;
      }
      seenMemories.add(key);
      yield { kind: "memory", memory, line: lineNo };
      continue;
    }
    const current = block as Block | null;
    if (!current || record.sessionId.toLowerCase() !== current.bundle.session.id) {
      const item = problem(`records of session ${record.sessionId} must follow that session's session line`);
      if (item) yield item;
      continue;
    }
    const { bundle } = current;
    if (record.type === "message") {
      const message = record.message as unknown as Message;
      const previous = bundle.messages.at(-1);
      if (previous && message.seq !== previous.seq + 1) {
        problem(`message seq ${message.seq} does not follow seq ${previous.seq} (seqs must be contiguous)`);
        continue;
      }
      bundle.messages.push(message);
    } else if (record.type === "summary") {
      bundle.summaries.push(record.summary);
    } else if (record.type === "branch") {
      (bundle.branches ??= []).push(record.branch as unknown as Branch);
    } else if (bundle.state) {
      problem("a session has at most one state line");
    } else {
      bundle.state = record.data;
    }
  }
  yield* flush();
}
