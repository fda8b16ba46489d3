/**
 * An open database of the SQLite store: its statements, the steps that take several statements
 * (each one transaction), and the decoding of rows, where a corrupt record is moved aside
 * (`_quarantine.ts`) instead of failing the read.
 */
import type Database from "better-sqlite3";
import { SessionNotFoundError } from "../../core/errors.js";
import type {
  AppendOptions,
  OwnerScope,
  Message,
  Session,
  SessionState,
  Summary,
  SummaryInput,
} from "../../core/types.js";
import { type BatchOutcome, BUSY } from "./_group-commit.js";
import { type SqliteHistory, sqliteHistory } from "./_history.js";
import type { TurnLeases } from "./_lease.js";
import { checkIncarnation, checkOwner, checkSummarySession } from "../_util.js";
import { hourOf } from "./_activity.js";
import { type IndexScope, indexPendingStep } from "./_indexer.js";
import { createQuarantine } from "./_quarantine.js";
import { openSqliteDatabase, type SqliteOpenSettings } from "./_schema.js";
import { applyCap, prepareStatements, type SqliteStatements } from "./_statements.js";
import type { EncodedMessage, MessageRow, SessionRow, StateRow } from "./_rows.js";

/** Expired sessions read per step of an expiry sweep (each step deletes as many as its time allows). */
const EXPIRE_CANDIDATES = 200;

/** The parsed JSON object, or why `raw` is not one. */
function parseObject(raw: string | null): Record<string, unknown> | string {
  try {
    const value: unknown = JSON.parse(raw ?? "");
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : "not a JSON object";
  } catch (error) {
    return (error as Error).message;
  }
}

/** An open SQLite store database. */
export interface SqliteStoreDb {
  /** The connection, for parts of the store that prepare their own statements (the file lease). */
  db: Database.Database;
  st: SqliteStatements;
  /** The steps of several statements, each one transaction. */
  tx: {
    append(id: string, encoded: EncodedMessage[], options: AppendOptions, now: number): Message[];
    pop(id: string): Message | null;
    /** Deletes the messages after `seq`, keeping the session's last activity. @returns how many. */
    truncate(id: string, seq: number): number;
    saveSummary(id: string, input: SummaryInput): Summary;
    deleteSession(id: string): boolean;
    /**
     * Deletes sessions last active before `olderThan`, one after another until `budgetMs` has passed
     * (at least one), in one transaction. @returns their ids, and whether more such sessions remain.
     */
    expire(olderThan: number, budgetMs: number): { ids: string[]; more: boolean };
    /**
     * Adds at most `limit` of the messages waiting for the full-text index to it (a session at a time,
     * each from its oldest): any session's, or only those of `scope` (one owner's sessions, or one
     * session of that owner). @returns true when messages (of `scope`) still wait.
     */
    indexPending(limit: number, scope?: IndexScope): boolean;
    /**
     * Runs writes in one transaction, each in a savepoint of its own (a write that throws is undone
     * alone). @returns each write's result or error. @throws when the transaction itself failed.
     */
    batch(writes: readonly (() => unknown)[]): BatchOutcome[];
  };
  /** Idempotent writes, tail replacement and branches. */
  history: SqliteHistory;
  /**
   * Runs `fn` (a write) without waiting for a write lock another connection holds: {@link BUSY} at once
   * then, nothing written, so an async caller can try again with the event loop free meanwhile.
   */
  tryWrite<T>(fn: () => T): T | typeof BUSY;
  /** The stored messages of one session's rows, skipping (and quarantining) corrupt ones. */
  messages(sessionId: string, rows: MessageRow[]): Message[];
  session(row: SessionRow): Session;
  /** @throws `session_not_found`. */
  state(id: string): SessionState;
  /** The state held in a session's row (read with the session: see `getSessionWithState`). */
  stateOf(id: string, row: StateRow): SessionState;
  /**
   * Runs `fn`'s reads in one read transaction (one snapshot, one WAL read lock taken and given back,
   * where each statement alone takes its own), or in the transaction already open.
   */
  read<T>(fn: () => T): T;
  summaries(id: string): Summary[];
  /**
   * @throws `session_not_found`. With `owner`, also its owner check (see `OwnerScope`); with
   * `sessionCreatedAt`, also that it is that incarnation (see `AppendOptions.sessionCreatedAt`).
   */
  exists(id: string, owner?: OwnerScope, sessionCreatedAt?: number): void;
  close(): void;
}

/**
 * Opens the database at `settings.path` and prepares everything the store runs on it. `onWrite` is
 * called after each committed write transaction (the checkpointer counts them).
 */
export function openSqliteStoreDb(
  settings: SqliteOpenSettings,
  leases: Pick<TurnLeases, "check" | "releaseIn">,
  onWrite: () => void = () => {},
): SqliteStoreDb {
  const db = openSqliteDatabase(settings);
  const st = prepareStatements(db);
  // IMMEDIATE takes the write lock up front: a deferred transaction that reads first would fail with
  // SQLITE_BUSY, without waiting, when another process wrote in between.
  const write = <A extends unknown[], R>(fn: (...args: A) => R) => {
    const transaction = db.transaction(fn);
    return (...args: A): R => {
      const result = transaction.immediate(...args);
      // A write nested in another (a savepoint of a group commit) is counted once, with its transaction.
      if (!db.inTransaction) onWrite();
      return result;
    };
  };

  const { quarantine, read } = createQuarantine(db, st, write);

  // The newest messages may be what carries the session's activity (schema v9): the row keeps it.
  // Inside the write's transaction, so no append of another connection lands between the read and the touch.
  const keepingActivity = (sessionId: string, remove: () => number): number => {
    const at = st.activity.get(sessionId);
    const removed = remove();
    if (removed > 0 && at !== undefined) st.touch.run(at, sessionId);
    return removed;
  };

  const messages = (sessionId: string, rows: MessageRow[]): Message[] => {
    const result: Message[] = [];
    for (const [seq, createdAt, body] of rows) {
      const message = parseObject(body);
      if (typeof message === "string" || typeof message.role !== "string") {
        const reason = typeof message === "string" ? message : "no role";
        quarantine(
          "message",
          sessionId,
          seq,
          body,
          reason,
          () => keepingActivity(sessionId, () => st.deleteMessage.run(sessionId, seq).changes),
          () => st.messageBody.get(sessionId, seq) === body,
        );
        continue;
      }
      message.seq = seq;
      message.createdAt = createdAt;
      result.push(message as unknown as Message);
    }
    return result;
  };

  const session = (row: SessionRow): Session => {
    let metadata = parseObject(row.metadata);
    if (typeof metadata === "string") {
      quarantine(
        "metadata",
        row.id,
        null,
        row.metadata,
        metadata,
        () => st.setMetadata.run("{}", row.id),
        () => st.getSession.get(row.id)?.metadata === row.metadata,
      );
      metadata = {};
    }
    const { id, user_id: userId, created_at: createdAt, last_activity_at: lastActivityAt } = row;
    return { id, userId, createdAt, lastActivityAt, metadata };
  };

  const state = (id: string): SessionState => {
    const row = st.getState.get(id);
    if (!row) throw new SessionNotFoundError(id);
    return stateOf(id, row);
  };

  const stateOf = (id: string, row: StateRow): SessionState => {
    let data = parseObject(row.state);
    if (typeof data === "string") {
      // The version stays, so a writer that read it can still replace the lost data.
      quarantine(
        "state",
        id,
        null,
        row.state,
        data,
        () => st.resetState.run(id),
        () => st.getState.get(id)?.state === row.state,
      );
      data = {};
    }
    return { version: row.state_version, data };
  };

  const summaries = (id: string): Summary[] =>
    st.listSummaries.all(id).flatMap((row): Summary[] => {
      const metadata = row.metadata === null ? undefined : parseObject(row.metadata);
      if (typeof metadata === "string") {
        quarantine(
          "summary",
          id,
          null,
          row,
          metadata,
          () => st.deleteSummary.run(id, row.id),
          () => st.listSummaries.all(id).some((now) => now.id === row.id && now.metadata === row.metadata),
        );
        return [];
      }
      const { from_seq: fromSeq, to_seq: toSeq, content, created_at: createdAt } = row;
      return [{ id: row.id, fromSeq, toSeq, content, createdAt, ...(metadata ? { metadata } : {}) }];
    });

  const exists = (id: string, owner?: OwnerScope, sessionCreatedAt?: number) => {
    if (!owner && sessionCreatedAt === undefined) {
      if (!st.sessionExists.get(id)) throw new SessionNotFoundError(id);
      return;
    }
    const found = st.owner.get(id);
    if (!found) throw new SessionNotFoundError(id);
    checkOwner(id, owner, found);
    checkIncarnation(id, found, sessionCreatedAt);
  };

  const history = sqliteHistory({ db, st, leases, write, messages, exists });

  // Run with exec, not prepared: SQLite applies this pragma when the statement is compiled (2-3 µs).
  const noWait = "PRAGMA busy_timeout = 0";
  const wait = `PRAGMA busy_timeout = ${Math.max(0, Math.floor(settings.busyTimeoutMs))}`;
  const tryWrite = <T>(fn: () => T): T | typeof BUSY => {
    db.exec(noWait);
    try {
      return fn();
    } catch (error) {
      // Only a write that never began (its BEGIN found the lock taken) can simply be tried again.
      if ((error as { code?: unknown }).code === "SQLITE_BUSY" && !db.inTransaction) return BUSY;
      throw error;
    } finally {
      db.exec(wait);
    }
  };

  const purge = (id: string) => {
    history.purge(id);
    st.dequeueSession.run(id);
    st.deleteAllMessages.run(id);
    st.deleteSummaries.run(id);
    // Quarantined records go with their session: a deleted conversation must leave nothing behind.
    st.deleteQuarantine.run(id);
    return st.deleteSession.run(id).changes > 0;
  };

  const tx: SqliteStoreDb["tx"] = {
    append: write((id: string, encoded: EncodedMessage[], options: AppendOptions, now: number) => {
      // The owner and expiry check and the last seq in one read; the messages' created_at is the activity.
      const { owner } = options;
      const since = owner?.activeSince ?? Number.MIN_SAFE_INTEGER;
      const head = owner ? st.appendHeadOwned.get(id, owner.userId, since, since) : st.appendHead.get(id);
      if (!head) throw new SessionNotFoundError(id);
      const [key, lastSeq, queued, ftsSeq, createdAt, activeHour, rowActivityAt] = head;
      checkIncarnation(id, { createdAt }, options.sessionCreatedAt);
      leases.check(id, options.fence, options.releaseLease);
      const first = (lastSeq ?? 0) + 1;
      const last = first + encoded.length - 1;
      for (let i = 0; i < encoded.length; i++) st.insertMessage.run(id, first + i, now, encoded[i]);
      // Seqs start at 1, so a session whose last seq is within the cap holds no more: its first seq is not read.
      const max = options.maxMessages ?? 0;
      if (max > 0 && last > max) applyCap(st, id, st.firstSeq.get(id) ?? first, last, options);
      // The session row (another page of log) is written only to move active_hour, to index seqs used
      // again, or when no message carries the activity; otherwise the new messages do (schema v9).
      if (encoded.length === 0) st.touchAppended.run(now, last, key);
      else {
        if (first <= ftsSeq) st.appendedBelowIndexed.run(now, last, first - 1, key);
        else if (activeHour !== hourOf(now) || rowActivityAt > now) st.touchAppended.run(now, last, key);
        if (!queued) st.queueForIndex.run(key);
      }
      // The stored JSON read back, as a later read returns it; seq and createdAt set on it, not spread into a copy.
      return encoded.map((body, i) => {
        const message = JSON.parse(body);
        message.seq = first + i;
        message.createdAt = now;
        return message as Message;
      });
    }),

    pop: write((id: string): Message | null => {
      exists(id);
      for (;;) {
        const row = st.newest(id, 1)[0];
        if (!row) return null;
        const [message] = messages(id, [row]);
        if (!message) continue;
        keepingActivity(id, () => st.deleteMessage.run(id, message.seq).changes);
        return message;
      }
    }),

    truncate: write((id: string, seq: number): number => {
      exists(id);
      return keepingActivity(id, () => st.truncateAfter.run(id, seq).changes);
    }),

    saveSummary: write((id: string, input: SummaryInput): Summary => {
      const session = st.getSession.get(id);
      if (!session) throw new SessionNotFoundError(id);
      checkSummarySession(id, { createdAt: session.created_at }, input);
      const { fromSeq, toSeq, content, metadata } = input;
      const summaryId = st.nextSummaryId.get(id)!.next;
      const createdAt = input.createdAt ?? Date.now();
      const json = metadata ? JSON.stringify(metadata) : null;
      st.insertSummary.run(id, summaryId, fromSeq, toSeq, content, createdAt, json);
      const stored = json ? { metadata: JSON.parse(json) } : {};
      return { id: summaryId, fromSeq, toSeq, content, createdAt, ...stored };
    }),

    deleteSession: write(purge),

    expire: write((olderThan: number, budgetMs: number) => {
      const started = performance.now();
      const candidates = st.inactiveSessions.all(olderThan, EXPIRE_CANDIDATES).map((row) => row.id);
      const ids: string[] = [];
      for (const id of candidates) {
        purge(id);
        ids.push(id);
        if (performance.now() - started >= budgetMs) break;
      }
      return { ids, more: ids.length < candidates.length || candidates.length === EXPIRE_CANDIDATES };
    }),

    indexPending: write((limit: number, scope?: IndexScope) => indexPendingStep(st, limit, scope)),

    batch: write((writes: readonly (() => unknown)[]) =>
      writes.map((run): BatchOutcome => {
        try {
          // Each write is a transaction function: inside this one, better-sqlite3 runs it as a savepoint.
          return { ok: true, value: run() };
        } catch (error) {
          // Some failures (an I/O error, running out of memory) end the whole transaction, and the
          // writes before this one with it: the batch fails as a whole then.
          if (!db.inTransaction) throw error;
          return { ok: false, error };
        }
      }),
    ),
  };

  return {
    db,
    st,
    tx,
    history,
    tryWrite,
    messages,
    session,
    state,
    stateOf,
    read,
    summaries,
    exists,
    close: () => db.close(),
  };
}
