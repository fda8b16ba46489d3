/**
 * The turn lease: whole turns of one session run one at a time, and `openTurn` reads what a turn
 * needs once it is granted.
 */
import type { OwnerScope } from "./query-types.js";
import type { Message, Session, SessionState, Summary } from "./session-types.js";

/** A held turn lease: whole turns of one session run one at a time. */
export interface Lease {
  sessionId: string;
  /** Increases with every grant on a session; pass it to appends so a stale holder cannot commit. */
  fence: number;
  /** When the lease lapses unless renewed or released, in milliseconds since the epoch (moved by `renew`). */
  expiresAt: number;
  /**
   * Extends the lease to `ttlMs` from now while this holder still has it: the heartbeat of a long turn
   * (`Memory.runTurn` beats for you). A lease that lapsed is taken back when nobody was granted it since.
   * @returns false when another holder was granted the session (this fence is stale).
   * @throws `store_unavailable` when the store cannot be reached; the lease may still be held.
   */
  renew(ttlMs: number): Promise<boolean>;
  /** Gives the lease up (idempotent). @throws `store_unavailable`; a failed release may be called again. */
  release(): Promise<void>;
}

/** What {@link SessionStore.openTurn} reads once the turn lease is granted. */
export interface TurnOpening {
  /** The caller: another owner's session is reported as `foreign` and nothing of it is returned. */
  owner: OwnerScope;
  /** How to wait for the lease. */
  lease?: LeaseOptions;
  /** How many of the newest messages to read (0: none). */
  last: number;
}

/** A turn begun by {@link SessionStore.openTurn}: the held lease and the session as it was when granted. */
export interface OpenedTurn {
  /** The session's turn lease, held by the caller (release it, or commit with `releaseLease`). */
  lease: Lease;
  /**
   * `ok`: the owner's active session, read; `missing`: there is none (or it is past the store's own
   * TTL); `foreign`: another owner's; `expired`: the owner's, inactive since before `owner.activeSince`.
   * Only `ok` reads anything.
   */
  status: "ok" | "missing" | "foreign" | "expired";
  /** The session record when `ok`, else null. */
  session: Session | null;
  /** The newest `last` messages, oldest first. */
  messages: Message[];
  /** Every summary, ordered by `fromSeq`. */
  summaries: Summary[];
  state: SessionState;
}

/** Options of {@link SessionStore.acquireLease}. */
export interface LeaseOptions {
  /** How long the lease lasts if not released (a crashed holder blocks no longer). @default 30000 */
  ttlMs?: number;
  /** How long to wait in line before failing with `session_busy`. @default 30000 */
  waitMs?: number;
}
