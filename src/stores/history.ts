/**
 * History changes every store shares: idempotent writes (operation ids), replacing a tail, and
 * branches. The checks and digests are one piece for all five stores; the in-process stores (memory,
 * file) also plan their changes here, as data, and apply the plan the way they persist.
 */
import { createHash } from "node:crypto";
import { ThreadkeepError } from "../core/errors.js";
import {
  BRANCH_REASONS,
  type Branch,
  type BranchRecord,
  type Message,
  type MessageInput,
  OPERATION_HISTORY,
  type ReplaceOptions,
  type Summary,
} from "../core/types.js";
import { stampMessages } from "./_util.js";

/** An applied idempotent write: what it wrote, so a retry returns it without writing again. */
export interface OperationRecord {
  id: string;
  /** {@link operationDigest} of the write: the same id with other content is a conflict. */
  digest: string;
  fromSeq: number;
  toSeq: number;
  at: number;
}

/** The history of one session as the in-process stores hold it. */
export interface HistoryData {
  messages: Message[];
  branches: Branch[];
  operations: OperationRecord[];
  /** The session's summaries: a cap with `keepUnsummarized` drops none past their reach (none without them). */
  summaries?: readonly Pick<Summary, "toSeq">[];
}

/** The furthest seq a summary reaches (0: none): a cap with `keepUnsummarized` drops nothing past it. */
export function summaryReach(summaries: readonly Pick<Summary, "toSeq">[] = []): number {
  let reach = 0;
  for (const s of summaries) reach = Math.max(reach, s.toSeq);
  return reach;
}

/** The longest operation id accepted. */
const MAX_OPERATION_ID = 200;

/**
 * The fingerprint of a write: its kind, position and messages (seq and createdAt of inputs ignored).
 * `seq` is null for an append, which has no position of its own.
 */
export function operationDigest(seq: number | null, messages: MessageInput[]): string {
  const bodies = messages.map((m) => {
    const { seq: _s, createdAt: _c, ...rest } = m as Partial<Message>;
    return rest;
  });
  let json: string;
  try {
    json = JSON.stringify([seq, bodies]);
  } catch (error) {
    throw new ThreadkeepError("invalid_request", `Cannot store a value as JSON: ${(error as Error).message}`, {
      cause: error,
    });
  }
  return createHash("sha256").update(json).digest("base64url");
}

/** @throws `invalid_request` for a malformed operation id, seq or branch. */
export function checkHistoryOptions(options: ReplaceOptions, seq?: number): void {
  const { operationId, expectedLastSeq, branch } = options;
  if (
    operationId !== undefined &&
    (typeof operationId !== "string" || !operationId || operationId.length > MAX_OPERATION_ID)
  ) {
    throw new ThreadkeepError(
      "invalid_request",
      `operationId must be a string of 1 to ${MAX_OPERATION_ID} characters`,
      {
        details: { param: "operationId" },
      },
    );
  }
  if (seq !== undefined && (!Number.isSafeInteger(seq) || seq < 0)) {
    throw new ThreadkeepError("invalid_request", "seq must be a non-negative integer", { details: { param: "seq" } });
  }
  if (expectedLastSeq !== undefined && !Number.isSafeInteger(expectedLastSeq)) {
    throw new ThreadkeepError("invalid_request", "expectedLastSeq must be an integer", {
      details: { param: "expectedLastSeq" },
    });
  }
  if (branch !== undefined && !BRANCH_REASONS.includes(branch?.reason)) {
    throw new ThreadkeepError("invalid_request", `branch.reason must be one of ${BRANCH_REASONS.join(", ")}`, {
      details: { param: "branch.reason" },
    });
  }
}

/** The error of an operation id reused with other content. */
export function operationConflict(operationId: string): ThreadkeepError {
  return new ThreadkeepError(
    "operation_conflict",
    `Operation ${JSON.stringify(operationId)} was already applied to this session with other content`,
  );
}

/** The error of a history that is not what the caller expected. */
export function historyConflict(message: string): ThreadkeepError {
  return new ThreadkeepError("history_conflict", message);
}

/** @throws `history_conflict` unless a tail after `seq` can be replaced in a history of `first..last`. */
export function checkReplaceTarget(seq: number, first: number, last: number, expectedLastSeq?: number): void {
  if (expectedLastSeq !== undefined && last !== expectedLastSeq) {
    throw historyConflict(`The session's last seq is ${last}, not ${expectedLastSeq}`);
  }
  // Seqs before the first stored message were capped away and are never given again.
  if (seq < first - 1 || seq > last) {
    throw historyConflict(`seq ${seq} is not in the stored history (seqs ${first} to ${last})`);
  }
}

/** @throws `not_found` for an unknown branch id. */
export function branchNotFound(branchId: number): ThreadkeepError {
  return new ThreadkeepError("not_found", `No branch ${branchId} in this session`);
}

/** The applied operation with this id, or null; @throws `operation_conflict` when its content differs. */
export function findOperation(
  operations: OperationRecord[],
  id: string | undefined,
  digest: string,
): OperationRecord | null {
  if (id === undefined) return null;
  const found = operations.find((op) => op.id === id);
  if (found && found.digest !== digest) throw operationConflict(id);
  return found ?? null;
}

/** Records an applied operation, forgetting the oldest past {@link OPERATION_HISTORY}. */
export function rememberOperation(operations: OperationRecord[], op: OperationRecord): void {
  operations.push(op);
  if (operations.length > OPERATION_HISTORY) operations.splice(0, operations.length - OPERATION_HISTORY);
}

/** Inserts or replaces a branch by id, keeping the list ordered by id. */
export function upsertBranch(branches: Branch[], branch: Branch): void {
  const at = branches.findIndex((b) => b.id === branch.id);
  if (at >= 0) branches[at] = branch;
  else {
    branches.push(branch);
    branches.sort((a, b) => a.id - b.id);
  }
}

/** Hangs the branches `ids` on `parentId`. */
export function reparent(branches: Branch[], ids: number[], parentId: number | null): void {
  for (const branch of branches) if (ids.includes(branch.id)) branch.parentId = parentId;
}

/** A branch as the SQL stores keep it (SQLite and PostgreSQL: one row, JSON columns). */
export interface BranchRow {
  id: number;
  at_seq: number;
  parent_id: number | null;
  reason: string;
  created_at: number;
  metadata: string | null;
  messages: string;
}

/** A stored branch row as a {@link Branch}. */
export const toBranch = (row: BranchRow): Branch => ({
  id: row.id,
  atSeq: row.at_seq,
  parentId: row.parent_id,
  reason: row.reason as Branch["reason"],
  createdAt: row.created_at,
  ...(row.metadata === null ? {} : { metadata: JSON.parse(row.metadata) }),
  messages: JSON.parse(row.messages),
});

/** A branch record as stored: an id (the given one or the next), copies of everything. */
export function branchFromRecord(record: BranchRecord, nextId: number): Branch {
  return {
    id: record.id ?? nextId,
    atSeq: record.atSeq,
    parentId: record.parentId ?? null,
    reason: record.reason,
    createdAt: record.createdAt ?? Date.now(),
    ...(record.metadata ? { metadata: structuredClone(record.metadata) } : {}),
    messages: structuredClone(record.messages),
  };
}

/** A planned write of an in-process store: apply all of it, or (on a throw while planning) none. */
export interface HistoryWritePlan {
  /** Messages after this seq are removed first (absent for a plain append). */
  truncateAfter?: number;
  added: Message[];
  /** The cap drops messages before this seq. */
  trimBeforeSeq?: number;
  /** A new branch holding the removed messages. */
  branch?: Branch;
  /** Main-line branches that move onto {@link branch}. */
  moved: number[];
  operation?: OperationRecord;
  /** Set when the operation was applied before: nothing is written, this is the result. */
  replayed?: Message[];
}

/**
 * Plans an append (`seq` undefined) or a tail replacement of an in-process store's history.
 * `checkFence` runs once the write is known not to be a replay: a replay changes nothing, so it is
 * answered whatever the fence (as on every store; a store whose check is async checks after a plan
 * that is not a replay).
 * @throws `history_conflict`, `operation_conflict`, and what `checkFence` throws.
 */
export function planHistoryWrite(
  data: HistoryData,
  seq: number | undefined,
  valid: MessageInput[],
  options: ReplaceOptions,
  now: number,
  checkFence?: () => void,
): HistoryWritePlan {
  const digest = options.operationId === undefined ? "" : operationDigest(seq ?? null, valid);
  const applied = findOperation(data.operations, options.operationId, digest);
  if (applied) {
    const replayed = data.messages.filter((m) => m.seq >= applied.fromSeq && m.seq <= applied.toSeq);
    return { added: [], moved: [], replayed: structuredClone(replayed) };
  }
  checkFence?.();
  const first = data.messages[0]?.seq ?? 1;
  const last = data.messages.at(-1)?.seq ?? 0;
  let after = last;
  let removed: Message[] = [];
  if (seq !== undefined) {
    checkReplaceTarget(seq, first, last, options.expectedLastSeq);
    after = seq;
    removed = data.messages.filter((m) => m.seq > seq);
  }
  const added = stampMessages(valid, after + 1, now);
  const kept = data.messages.length - removed.length + added.length;
  const cap = Math.floor(options.maxMessages ?? 0);
  const all = [...data.messages.slice(0, data.messages.length - removed.length), ...added];
  const plan: HistoryWritePlan = { added, moved: [] };
  if (seq !== undefined) plan.truncateAfter = seq;
  if (cap > 0 && kept > cap) {
    let keepFrom = all[all.length - cap].seq;
    if (options.keepUnsummarized) {
      keepFrom = Math.min(keepFrom, summaryReach(data.summaries) + 1);
      // The ceiling: past it the oldest go, summarised or not.
      const hard = Math.floor(options.hardCap ?? 0);
      if (hard > 0 && kept > hard) keepFrom = Math.max(keepFrom, all[all.length - hard].seq);
    }
    if (keepFrom > all[0].seq) plan.trimBeforeSeq = keepFrom;
  }
  if (options.branch && removed.length > 0) {
    const nextId = (data.branches.at(-1)?.id ?? 0) + 1;
    plan.branch = branchFromRecord(
      {
        atSeq: after,
        parentId: null,
        reason: options.branch.reason,
        createdAt: now,
        metadata: options.branch.metadata,
        messages: removed,
      },
      nextId,
    );
    plan.moved = data.branches.filter((b) => b.parentId === null && b.atSeq > after).map((b) => b.id);
  }
  if (options.operationId !== undefined) {
    plan.operation = { id: options.operationId, digest, fromSeq: after + 1, toSeq: after + added.length, at: now };
  }
  return plan;
}

/** Applies a {@link planHistoryWrite} plan to in-process data. */
export function applyHistoryWrite(data: HistoryData, plan: HistoryWritePlan): void {
  if (plan.truncateAfter !== undefined) data.messages = data.messages.filter((m) => m.seq <= plan.truncateAfter!);
  data.messages.push(...structuredClone(plan.added));
  if (plan.trimBeforeSeq !== undefined) data.messages = data.messages.filter((m) => m.seq >= plan.trimBeforeSeq!);
  if (plan.branch) {
    reparent(data.branches, plan.moved, plan.branch.id);
    upsertBranch(data.branches, structuredClone(plan.branch));
  }
  if (plan.operation) rememberOperation(data.operations, { ...plan.operation });
}

/** A planned branch switch of an in-process store. */
export interface BranchSwitchPlan {
  atSeq: number;
  /** The branch's messages, back on the main line. */
  restored: Message[];
  /** The branch after the switch: the same id, holding the main line's former tail. */
  branch: Branch;
  /** The branch's children, now on the main line. */
  toMain: number[];
  /** Main-line branches after `atSeq`, now on the branch. */
  toBranch: number[];
}

/** Plans a branch switch. @throws `not_found`, `history_conflict`. */
export function planBranchSwitch(data: HistoryData, branchId: number): BranchSwitchPlan {
  const target = data.branches.find((b) => b.id === branchId);
  if (!target) throw branchNotFound(branchId);
  if (target.parentId !== null) {
    throw historyConflict(`Branch ${branchId} splits from branch ${target.parentId}: switch to that one first`);
  }
  const first = data.messages[0]?.seq ?? 1;
  const last = data.messages.at(-1)?.seq ?? 0;
  checkReplaceTarget(target.atSeq, first, last);
  const tail = data.messages.filter((m) => m.seq > target.atSeq);
  return {
    atSeq: target.atSeq,
    restored: structuredClone(target.messages),
    branch: { ...structuredClone(target), messages: structuredClone(tail) },
    toMain: data.branches.filter((b) => b.parentId === branchId).map((b) => b.id),
    toBranch: data.branches
      .filter((b) => b.parentId === null && b.id !== branchId && b.atSeq > target.atSeq)
      .map((b) => b.id),
  };
}

/** Applies a {@link planBranchSwitch} plan to in-process data. */
export function applyBranchSwitch(data: HistoryData, plan: BranchSwitchPlan): void {
  data.messages = [...data.messages.filter((m) => m.seq <= plan.atSeq), ...structuredClone(plan.restored)];
  reparent(data.branches, plan.toMain, null);
  reparent(data.branches, plan.toBranch, plan.branch.id);
  upsertBranch(data.branches, structuredClone(plan.branch));
}
