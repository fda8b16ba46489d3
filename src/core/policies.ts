import { ThreadkeepError } from "./errors.js";

/** Defaults that come from the requirements (see DESIGN.md). Every one is a setting. */
export const DEFAULTS = {
  /** Recent messages sent back to the model. */
  window: 20,
  /** Tokens of history + new input sent to the model. */
  tokenBudget: 8_000,
  /** Messages kept per session; the oldest are summarized (when a summarizer is set) and dropped. */
  maxMessages: 200,
  /** Inactivity expiry of persistent stores. */
  ttlMs: 7 * 24 * 60 * 60_000,
  /** Inactivity expiry of the in-memory store. */
  memoryTtlMs: 30 * 60_000,
  /** Lifetime of a turn's lease, renewed by its heartbeat: how long a crashed holder blocks its session. */
  leaseTtlMs: 10_000,
  /** How long a turn waits for the one before it. */
  turnWaitMs: 60_000,
  /** Owner of sessions created without one (single-user library use). */
  userId: "default",
} as const;

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * Parses a duration such as `7d`, `30m`, `1h30m`, `500ms` or a plain number of milliseconds.
 * @throws ThreadkeepError `invalid_request` for anything else.
 */
export function parseDuration(value: string | number): number {
  if (typeof value === "number" && Number.isFinite(value) && value >= 0) return value;
  const text = String(value).trim().toLowerCase();
  if (/^\d+$/.test(text)) return Number(text);
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/g;
  let total = 0;
  let consumed = 0;
  for (const match of text.matchAll(re)) {
    total += Number(match[1]) * UNITS[match[2]];
    consumed += match[0].length;
  }
  if (consumed === 0 || consumed !== text.length) {
    throw new ThreadkeepError("invalid_request", `Invalid duration ${JSON.stringify(value)}: use e.g. 30m, 7d, 1h30m`);
  }
  return Math.round(total);
}

/** Parses a positive integer setting. @throws ThreadkeepError `invalid_request`. */
export function parsePositiveInt(value: string | number, name: string): number {
  const n = typeof value === "number" ? value : Number(String(value).trim());
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new ThreadkeepError(
      "invalid_request",
      `${name} must be a positive whole number, got ${JSON.stringify(value)}`,
    );
  }
  return n;
}
