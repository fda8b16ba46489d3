import { createHash } from "node:crypto";
import { ThreadkeepError } from "../../core/errors.js";
import type { MessageInput } from "../../core/types.js";
import type { ReconcilePlan } from "../../core/reconcile.js";

/** A finished turn's answer, kept to replay for a retry with the same `Idempotency-Key`. */
export type TurnOutcome = (
  | { kind: "json"; status: number; headers: Record<string, string>; body: unknown }
  /** `events`: the SSE text sent, in the pieces it was written. */
  | { kind: "sse"; status: number; headers: Record<string, string>; events: string[] }
) & {
  /** The turn's commit when its save was unconfirmed: a retry makes it (at most once) before replaying. */
  unconfirmed?: { messages: MessageInput[]; reconciled?: ReconcilePlan };
};

/** Options of {@link IdempotencyCache}. */
export interface IdempotencyOptions {
  /** How long a result is replayed. @default 86400000 (24 h) */
  ttlMs?: number;
  /** Most results kept; the oldest go first. @default 10000 */
  maxEntries?: number;
}

interface Entry {
  fingerprint: string;
  expiresAt: number;
  done: Promise<TurnOutcome | undefined>;
}

/** What {@link IdempotencyCache.begin} decided. */
export type IdempotencyTicket =
  { first: true; settle(outcome: TurnOutcome | undefined): void } | { first: false; outcome: TurnOutcome };

/** A stable fingerprint of a request body, so a key reused for a different request is caught. */
export function fingerprintOf(body: unknown): string {
  return createHash("sha256").update(JSON.stringify(body)).digest("base64url");
}

/**
 * Results of turns by idempotency key, in this process (an LRU with expiry). A retry that arrives
 * while the first attempt runs waits for it; a failed first attempt is forgotten, so its retry runs
 * anew. Being in-process, it does not span several server instances or a restart.
 */
export class IdempotencyCache {
  readonly #entries = new Map<string, Entry>();
  readonly #ttlMs: number;
  readonly #maxEntries: number;

  constructor(options: IdempotencyOptions = {}) {
    this.#ttlMs = options.ttlMs ?? 86_400_000;
    this.#maxEntries = options.maxEntries ?? 10_000;
  }

  /**
   * Either the first use of `key` (run the turn, then `settle` with its outcome, or `undefined` on
   * failure) or the stored outcome of an earlier use, awaited if it is still running.
   * @throws ThreadkeepError `invalid_request` when the key was used with a different request body.
   */
  async begin(key: string, fingerprint: string): Promise<IdempotencyTicket> {
    for (;;) {
      const entry = this.#entries.get(key);
      if (entry && entry.expiresAt > Date.now()) {
        if (entry.fingerprint !== fingerprint) {
          throw new ThreadkeepError(
            "invalid_request",
            "This Idempotency-Key was already used with a different request body",
            {
              details: { field: "Idempotency-Key" },
            },
          );
        }
        const outcome = await entry.done;
        if (outcome) return { first: false, outcome };
        // The first attempt failed and was forgotten; loop to run (or wait for another retry).
        continue;
      }
      if (entry) this.#entries.delete(key);
      let resolve!: (outcome: TurnOutcome | undefined) => void;
      const done = new Promise<TurnOutcome | undefined>((r) => (resolve = r));
      const fresh: Entry = { fingerprint, expiresAt: Date.now() + this.#ttlMs, done };
      this.#entries.set(key, fresh);
      if (this.#entries.size > this.#maxEntries) this.#entries.delete(this.#entries.keys().next().value as string);
      return {
        first: true,
        settle: (outcome) => {
          if (!outcome && this.#entries.get(key) === fresh) this.#entries.delete(key);
          resolve(outcome);
        },
      };
    }
  }

  /** Number of keys held (running or finished). */
  get size(): number {
    return this.#entries.size;
  }
}
