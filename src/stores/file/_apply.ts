/**
 * The rules of each record of the file store: what makes a record valid on its own, and what it
 * changes when applied to a replayed session. The same rules hold when writing and when replaying.
 */
import { validateMessage } from "../../core/messages.js";
import { rememberOperation, reparent, upsertBranch } from "../history.js";
import type { SessionData, SessionRecord } from "./_records.js";

/** Type guards of the values in a record. */
export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
export const isInt = (v: unknown): v is number => Number.isSafeInteger(v);
export const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

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
      if (!ok || typeof content !== "string") return "summary needs id, fromSeq, toSeq, content and createdAt";
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
      return Array.isArray(record.ids) &&
        record.ids.every(isInt) &&
        (record.parentId === null || isInt(record.parentId))
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
