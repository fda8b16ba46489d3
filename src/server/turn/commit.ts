/**
 * Committing a proxied turn: its new messages and the reply in one append (degrading to "not saved"
 * or "save unconfirmed", never throwing: the reply is already paid for). The decision to degrade is
 * made here, logged and reported.
 */
import { isOutcomeUnknown, isStorageFull, isThreadkeepError } from "../../core/errors.js";
import type { ReconcilePlan } from "../../core/reconcile.js";
import type { MessageInput, Session } from "../../core/types.js";
import { secondsSince } from "../metrics.js";
import type { TurnDeps } from "./lease.js";
import { inSpan } from "../../core/tracing.js";

/**
 * How a commit ended: stored; `not-saved` (refused, or the store was down before the write); or
 * `save-unconfirmed` (the write was sent but its answer lost: it may have been stored).
 */
export type CommitResult = "saved" | "not-saved" | "save-unconfirmed";

/** What {@link commitTurn} stores, and what it knows of its turn. */
export interface CommitTurnOptions {
  sessionId: string;
  userId: string;
  /** The turn's new messages and its reply. */
  messages: MessageInput[];
  /** The turn lease's fence; undefined when the turn runs without the lease (the store was down). */
  fence: number | undefined;
  /** The session record resolved this turn (saves a read). */
  session?: Session;
  /** From an `Idempotency-Key`: a retry stores the turn at most once. */
  operationId?: string;
  /** How the request was read: appended, or replacing a tail kept as a branch. */
  reconciled?: ReconcilePlan;
  /** The commit is the turn's last store call: it may release the lease in the same round trip. */
  last?: boolean;
}

/**
 * Stores a turn in one append; with `operationId` (from an `Idempotency-Key`) a retry stores it at
 * most once. Failures are logged and counted, and reported in the result, never thrown.
 */
export function commitTurn(deps: TurnDeps, options: CommitTurnOptions): Promise<CommitResult> {
  return inSpan(
    "threadkeep.commit",
    { attributes: { "threadkeep.messages": options.messages.length } },
    async (span) => {
      const result = await commitOnce(deps, options);
      span?.setAttribute("threadkeep.commit.result", result);
      return result;
    },
  );
}

async function commitOnce(deps: TurnDeps, options: CommitTurnOptions): Promise<CommitResult> {
  const { sessionId, userId, messages, fence, session, operationId, reconciled } = options;
  const start = performance.now();
  try {
    // A metadata write (the client's first seq moved) follows the append: the lease is released after it.
    const releaseLease = options.last && !reconciled?.metadata;
    const write = { userId, fence, session, operationId, branch: reconciled?.branch, releaseLease };
    if (reconciled?.replaceAfter !== undefined)
      await deps.memory.replaceAfter(sessionId, reconciled.replaceAfter, messages, write);
    else await deps.memory.addMessages(sessionId, messages, write);
    if (reconciled?.metadata) await deps.memory.updateSessionMetadata(sessionId, reconciled.metadata, { userId });
    deps.metrics.storeWrites.saved();
    deps.afterCommit?.(userId, sessionId);
    return "saved";
  } catch (error) {
    // An attempt of this idempotent request on another process committed already: stored once.
    if (operationId && isThreadkeepError(error, "operation_conflict")) return "saved";
    // The reply is already paid for: the client still gets it, told honestly what became of it.
    if (isOutcomeUnknown(error)) {
      deps.log.warn({ err: error, sessionId }, "saving the turn got no answer; it may or may not be stored");
      deps.metrics.error("save_unconfirmed");
      return "save-unconfirmed";
    }
    deps.log.warn({ err: error, sessionId }, "could not save the turn; the reply is returned unsaved");
    deps.metrics.error("not_saved");
    // Out of space (disk, file-size limit, Redis maxmemory): shown by /readyz until a commit succeeds.
    deps.metrics.storeWrites.failed(error);
    if (isStorageFull(error)) deps.metrics.error("storage_full");
    return "not-saved";
  } finally {
    deps.metrics.commitSeconds.observe(secondsSince(start));
  }
}
