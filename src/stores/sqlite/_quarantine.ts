/**
 * Corrupt records of the SQLite store: moved to the `quarantine` table with a warning, in a write of
 * their own, instead of failing the read that met them.
 */
import type Database from "better-sqlite3";
import type { SqliteStatements } from "./_statements.js";

/** What kind of stored record was quarantined. */
export type RecordKind = "message" | "summary" | "metadata" | "state";

/** A write transaction of the store (`BEGIN IMMEDIATE`), as `openSqliteStoreDb` makes them. */
type Write = <A extends unknown[], R>(fn: (...args: A) => R) => (...args: A) => R;

/** The store's quarantine, and the read transaction that puts it off until the read has ended. */
export interface SqliteQuarantine {
  /**
   * Moves a corrupt record aside and runs `cleanUp` (one write). `unchanged` tells, in that write,
   * whether the record still holds what was read: a quarantine put off until after a read transaction
   * leaves alone a record another connection replaced (or quarantined) meanwhile.
   */
  quarantine(
    kind: RecordKind,
    sessionId: string,
    seq: number | null,
    raw: unknown,
    reason: string,
    cleanUp: () => void,
    unchanged: () => boolean,
  ): void;
  /** Runs `fn` in one read transaction (one snapshot); the quarantines it met are applied after it. */
  read<T>(fn: () => T): T;
}

export function createQuarantine(db: Database.Database, st: SqliteStatements, write: Write): SqliteQuarantine {
  const moveAside = (kind: RecordKind, sessionId: string, seq: number | null, raw: unknown, reason: string) => {
    const text = typeof raw === "string" ? raw : JSON.stringify(raw);
    st.quarantine.run(sessionId, seq, kind, text, reason, Date.now());
    const where = seq === null ? "" : ` (seq ${seq})`;
    console.warn(
      `[threadkeep] sqlite: moved a corrupt ${kind} of session ${sessionId}${where} to quarantine: ${reason}`,
    );
  };
  const quarantineNow = write(
    (
      kind: RecordKind,
      sessionId: string,
      seq: number | null,
      raw: unknown,
      reason: string,
      cleanUp: () => void,
      unchanged?: () => boolean,
    ) => {
      if (unchanged && !unchanged()) return;
      moveAside(kind, sessionId, seq, raw, reason);
      cleanUp();
    },
  );
  // Quarantines met inside a read transaction (see `read`), applied once it has ended: a write there
  // would upgrade the read to a write, which SQLite refuses at once (SQLITE_BUSY, no busy handler for
  // an upgrade) while another connection holds the write lock, or (SQLITE_BUSY_SNAPSHOT) when another
  // committed since the snapshot; a write of its own waits out busy_timeout.
  let deferred: (() => void)[] | undefined;
  const quarantine = (
    kind: RecordKind,
    sessionId: string,
    seq: number | null,
    raw: unknown,
    reason: string,
    cleanUp: () => void,
    unchanged: () => boolean,
  ) => {
    if (!deferred) return quarantineNow(kind, sessionId, seq, raw, reason, cleanUp);
    deferred.push(() => quarantineNow(kind, sessionId, seq, raw, reason, cleanUp, unchanged));
  };

  const readTransaction = db.transaction(<T>(fn: () => T) => fn());
  const read = <T>(fn: () => T): T => {
    // In a transaction already open (a write: the file lease's grant), a quarantine nests in it.
    if (db.inTransaction) return fn();
    const pending: (() => void)[] = [];
    deferred = pending;
    let result: T;
    try {
      result = readTransaction(fn) as T;
    } finally {
      deferred = undefined;
    }
    // What was read leaves the corrupt records out already; each is moved aside in a write of its own.
    for (const apply of pending) apply();
    return result;
  };

  return { quarantine, read };
}
