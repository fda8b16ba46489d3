/**
 * The SQLite store's history changes: idempotent writes, tail replacement and branches, each one
 * IMMEDIATE transaction, so a concurrent append (another connection) lands wholly before or after.
 */
import type Database from "better-sqlite3";
import {
  type Branch,
  type BranchRecord,
  type Message,
  OPERATION_HISTORY,
  type OwnerScope,
  type ReplaceOptions,
} from "../../core/types.js";
import {
  branchFromRecord,
  type BranchRow,
  branchNotFound,
  checkReplaceTarget,
  findOperation,
  historyConflict,
  type OperationRecord,
  toBranch,
} from "../history.js";
import type { TurnLeases } from "./_lease.js";
import type { EncodedMessage, MessageRow } from "./_rows.js";
import { applyCap, type SqliteStatements } from "./_statements.js";

/** What the history steps need of the open database. */
export interface SqliteHistoryContext {
  db: Database.Database;
  st: SqliteStatements;
  leases: Pick<TurnLeases, "check" | "releaseIn">;
  write: <A extends unknown[], R>(fn: (...args: A) => R) => (...args: A) => R;
  messages(sessionId: string, rows: MessageRow[]): Message[];
  exists(id: string, owner?: OwnerScope, sessionCreatedAt?: number): void;
}

/** The history steps of one open database. */
export function sqliteHistory(ctx: SqliteHistoryContext) {
  const { db, st, leases, write } = ctx;
  const q = (sql: string) => db.prepare(sql);
  const h = {
    findOp: q(
      "SELECT id, digest, from_seq AS fromSeq, to_seq AS toSeq, at FROM operations WHERE session_id = ? AND id = ?",
    ),
    insertOp: q("INSERT INTO operations (session_id, id, digest, from_seq, to_seq, at) VALUES (?, ?, ?, ?, ?, ?)"),
    pruneOps: q(
      `DELETE FROM operations WHERE session_id = ? AND rowid <= (
         SELECT rowid FROM operations WHERE session_id = ? ORDER BY rowid DESC LIMIT 1 OFFSET ${OPERATION_HISTORY})`,
    ),
    listBranches: q(
      "SELECT id, at_seq, parent_id, reason, created_at, metadata, messages FROM branches WHERE session_id = ? ORDER BY id",
    ),
    nextBranchId: q("SELECT coalesce(max(id), 0) + 1 AS next FROM branches WHERE session_id = ?"),
    upsertBranch: q(
      `INSERT INTO branches (session_id, id, at_seq, parent_id, reason, created_at, metadata, messages)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (session_id, id) DO UPDATE SET at_seq = excluded.at_seq, parent_id = excluded.parent_id,
         reason = excluded.reason, created_at = excluded.created_at, metadata = excluded.metadata, messages = excluded.messages`,
    ),
    moveToBranch: q(
      "UPDATE branches SET parent_id = ? WHERE session_id = ? AND parent_id IS NULL AND at_seq > ? AND id <> ?",
    ),
    setParent: q("UPDATE branches SET parent_id = ? WHERE session_id = ? AND id = ?"),
    insertMessageAt: q("INSERT INTO messages (session_id, seq, created_at, body) VALUES (?, ?, ?, ?)"),
    deleteBranches: q("DELETE FROM branches WHERE session_id = ?"),
    deleteOps: q("DELETE FROM operations WHERE session_id = ?"),
  };

  const bounds = (id: string) => [st.firstSeq.get(id) ?? 1, st.lastSeq.get(id)?.seq ?? 0] as const;
  const tail = (id: string, after: number) =>
    ctx.messages(id, st.rangeOldestFirst.all(id, after + 1, Number.MAX_SAFE_INTEGER, -1));
  const saveBranch = (id: string, b: Branch) =>
    h.upsertBranch.run(
      id,
      b.id,
      b.atSeq,
      b.parentId,
      b.reason,
      b.createdAt,
      b.metadata ? JSON.stringify(b.metadata) : null,
      JSON.stringify(b.messages),
    );
  // Messages go in above the session's last seq (after any truncation): the full-text index takes
  // them from `first` on.
  const insertFrom = (id: string, first: number, rows: [createdAt: number, body: string][]) => {
    for (const [i, [createdAt, body]] of rows.entries()) h.insertMessageAt.run(id, first + i, createdAt, body);
    if (rows.length > 0) st.markUnindexed.run(first - 1, id);
  };

  return {
    /** An idempotent append (`seq` undefined) or a tail replacement. */
    write: write(
      (
        id: string,
        seq: number | undefined,
        encoded: EncodedMessage[],
        digest: string,
        options: ReplaceOptions,
        now: number,
      ): Message[] => {
        ctx.exists(id, options.owner, options.sessionCreatedAt);
        const applied = findOperation(
          options.operationId === undefined
            ? []
            : ([h.findOp.get(id, options.operationId)].filter(Boolean) as OperationRecord[]),
          options.operationId,
          digest,
        );
        // A replay changes nothing: it is answered whatever the fence, as on every store (and gives
        // back the lease it was asked to, if that is still the session's).
        if (applied) {
          if (options.releaseLease && options.fence !== undefined) leases.releaseIn?.(id, options.fence);
          return ctx.messages(id, st.rangeOldestFirst.all(id, applied.fromSeq, applied.toSeq, -1));
        }
        leases.check(id, options.fence, options.releaseLease);
        const [first, last] = bounds(id);
        let after = last;
        if (seq !== undefined) {
          checkReplaceTarget(seq, first, last, options.expectedLastSeq);
          after = seq;
          const removed = options.branch ? tail(id, seq) : [];
          if (removed.length > 0) {
            const branch = branchFromRecord(
              {
                atSeq: seq,
                parentId: null,
                reason: options.branch!.reason,
                createdAt: now,
                metadata: options.branch!.metadata,
                messages: removed,
              },
              (h.nextBranchId.get(id) as { next: number }).next,
            );
            h.moveToBranch.run(branch.id, id, seq, branch.id);
            saveBranch(id, branch);
          }
          st.truncateAfter.run(id, seq);
        }
        insertFrom(
          id,
          after + 1,
          encoded.map((body) => [now, body]),
        );
        applyCap(st, id, first, after + encoded.length, options);
        st.touch.run(now, id);
        if (options.operationId !== undefined) {
          h.insertOp.run(id, options.operationId, digest, after + 1, after + encoded.length, now);
          h.pruneOps.run(id, id);
        }
        return encoded.map((body, i) => ({ ...JSON.parse(body), seq: after + 1 + i, createdAt: now }) as Message);
      },
    ),

    listBranches: (id: string): Branch[] => (h.listBranches.all(id) as BranchRow[]).map(toBranch),

    switchBranch: write((id: string, branchId: number, fence: number | undefined, now: number): Branch => {
      ctx.exists(id);
      leases.check(id, fence);
      const branches = (h.listBranches.all(id) as BranchRow[]).map(toBranch);
      const target = branches.find((b) => b.id === branchId);
      if (!target) throw branchNotFound(branchId);
      if (target.parentId !== null)
        throw historyConflict(`Branch ${branchId} splits from branch ${target.parentId}: switch to that one first`);
      const [first, last] = bounds(id);
      checkReplaceTarget(target.atSeq, first, last);
      const swapped: Branch = { ...target, messages: tail(id, target.atSeq) };
      // The target's children come back to the main line; main-line branches after the point go with the tail.
      for (const b of branches) {
        if (b.parentId === branchId) h.setParent.run(null, id, b.id);
        else if (b.parentId === null && b.id !== branchId && b.atSeq > target.atSeq)
          h.setParent.run(branchId, id, b.id);
      }
      st.truncateAfter.run(id, target.atSeq);
      for (const message of target.messages) {
        const { seq, createdAt, ...body } = message;
        h.insertMessageAt.run(id, seq, createdAt, JSON.stringify(body));
      }
      if (target.messages.length > 0) st.markUnindexed.run(target.atSeq, id);
      saveBranch(id, swapped);
      st.touch.run(now, id);
      return swapped;
    }),

    saveBranch: write((id: string, record: BranchRecord): Branch => {
      ctx.exists(id);
      const branch = branchFromRecord(record, (h.nextBranchId.get(id) as { next: number }).next);
      saveBranch(id, branch);
      return branch;
    }),

    /** Removes a session's branches and operation ids (inside the caller's transaction). */
    purge(id: string): void {
      h.deleteBranches.run(id);
      h.deleteOps.run(id);
    },
  };
}

/** The history steps of an open database. */
export type SqliteHistory = ReturnType<typeof sqliteHistory>;
