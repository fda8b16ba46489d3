/**
 * What a {@link Compactor} remembers of a session between its checks, so that a write after which no
 * summary can be due costs no store read (and one that only reaches the cap, none either: the write
 * carries the cap). A hint holds lower bounds of values that only grow while a session lives (the seq
 * the newest summary reaches, the first stored seq), so another process's summaries and caps can only
 * make the next write check sooner.
 *
 * A session deleted and created again by another process, and grown there past the last seq this one
 * saw (within {@link HINT_MAX_AGE_MS}), is the exception: the old session's bounds are too high for the
 * new one. Its next check then comes as late as the old session's would have (once `window` +
 * `threshold` messages follow what the old summaries reached), but nothing is lost: a hint decides
 * only whether to read, never what is dropped. The cap drops only what the store's own summaries
 * cover (`keepUnsummarized`, decided in the write's atomic step); on a store that cannot bound it, a
 * `cap` plan reads first.
 */
/** The settings a compaction runs with; the hints judge by them whether a write can make one due. */
export interface CompactionSettings {
  window: number;
  /** Messages kept per session; 0: no cap. */
  maxMessages: number;
  threshold: number;
  maxBatch: number;
  /** The ceiling whatever the summaries do (see `CompactionOptions.hardCap`); unset: 2 × maxMessages. */
  hardCap?: number;
}

/** What a full check saw of one session (after it compacted). */
export interface SessionShape {
  /** The seq the newest summary reaches (0: none). Summaries only ever reach further. */
  coveredTo: number;
  /** The first stored seq. Only the cap changes it, and only upwards. */
  firstSeq: number;
  /** The newest stored seq. */
  lastSeq: number;
}

interface Hint extends SessionShape {
  /** The newest seq written through this process after the check: below it, messages were removed. */
  seen: number;
  /** When the check was made: an old hint is dropped (see {@link HINT_MAX_AGE_MS}). */
  checkedAt: number;
}

/** Sessions a compactor remembers; the least recently written are forgotten first. */
export const MAX_HINTS = 10_000;

/**
 * How long a hint is trusted. Deleting a session and creating it again under the same id resets what
 * only grows; a write that starts at or below the newest seq seen gives that away, and this bound
 * covers a new session that another process grew past the old one's length in the meantime.
 */
export const HINT_MAX_AGE_MS = 5 * 60_000;

/**
 * What a write that made `lastSeq` the newest seq needs, for a session of this shape (lower bounds):
 * - `none`: no summary is due while at most `window` plus `threshold` messages follow what is
 *   summarised (or capped), and the cap has nothing to drop while at most `maxMessages` seqs are spanned;
 * - `cap`: only the cap is due, and everything it drops is summarised already: keeping the newest
 *   `maxMessages` is the whole compaction, and the write did it (`keepUnsummarized`), with no read;
 * - `check`: read the session and compact (a summary may be due).
 * Every bound only grows with `coveredTo` and `firstSeq`, which is why stale (lower) values of them
 * err towards checking.
 */
export function planAfterWrite(
  shape: Pick<SessionShape, "coveredTo" | "firstSeq">,
  lastSeq: number,
  settings: CompactionSettings,
): "none" | "cap" | "check" {
  // A negative threshold asks for a summary of even an empty range: always check, as before.
  if (settings.threshold < 0) return "check";
  if (lastSeq > settings.window + settings.threshold + Math.max(shape.coveredTo, shape.firstSeq - 1)) return "check";
  if (settings.maxMessages <= 0 || lastSeq <= settings.maxMessages + shape.firstSeq - 1) return "none";
  return lastSeq - settings.maxMessages <= shape.coveredTo ? "cap" : "check";
}

/** Lower bounds every session meets: a short session needs no check even before its first one. */
const ANY_SESSION = { coveredTo: 0, firstSeq: 1 } as const;

/** Per-session hints, bounded in number ({@link MAX_HINTS}, least recently used out) and in age. */
export class CompactionHints {
  readonly #hints = new Map<string, Hint>();
  readonly #settings: CompactionSettings;
  readonly #max: number;

  constructor(settings: CompactionSettings, max = MAX_HINTS) {
    this.#settings = settings;
    this.#max = max;
  }

  /**
   * What a write that stored seqs `firstSeq..lastSeq` needs (see {@link planAfterWrite}), by what the
   * last check saw; the hint then moves on to `lastSeq`. Without a usable hint (none yet, too old, or
   * a write that starts at or below a seq already seen: messages were removed, or the session is a new
   * one under the same id) the bounds every session meets stand in: nothing summarised, first seq 1.
   */
  plan(sessionId: string, firstSeq: number, lastSeq: number): "none" | "cap" | "check" {
    let hint = this.#hints.get(sessionId);
    if (hint && (Date.now() - hint.checkedAt > HINT_MAX_AGE_MS || firstSeq <= hint.seen)) {
      this.#hints.delete(sessionId);
      hint = undefined;
    }
    const plan = planAfterWrite(hint ?? ANY_SESSION, lastSeq, this.#settings);
    if (hint && plan !== "check") {
      hint.seen = lastSeq;
      // Most recently written last: the map's first key is the one to forget.
      this.#hints.delete(sessionId);
      this.#hints.set(sessionId, hint);
    }
    return plan;
  }

  /** Remembers what a full check saw (after its own summary and cap). */
  learn(sessionId: string, shape: SessionShape): void {
    this.#hints.delete(sessionId);
    this.#hints.set(sessionId, { ...shape, seen: shape.lastSeq, checkedAt: Date.now() });
    if (this.#hints.size > this.#max) this.#hints.delete(this.#hints.keys().next().value!);
  }

  /** Forgets a session (its check failed, or it is empty). */
  forget(sessionId: string): void {
    this.#hints.delete(sessionId);
  }

  /** How many sessions are remembered. */
  get size(): number {
    return this.#hints.size;
  }
}
