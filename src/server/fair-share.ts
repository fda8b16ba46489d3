/**
 * Fair share: per-user and per-API-key limits on the model requests a caller has in flight and on
 * how many it sends per period, so one caller's flood is refused (`429` with `Retry-After`) before it
 * takes a place in a session's line, a store round trip or an upstream call, and everyone else's turns
 * go on. A front-end's side requests (title, tags, follow-ups) are counted apart from turns, so they
 * never use up, nor wait for, the chat's own share. Counts live in this process (see docs/deployment.md,
 * "Fair share"); the rate is counted by rate-limiter-flexible.
 */
import type { FastifyRequest } from "fastify";
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { ThreadkeepError } from "../core/errors.js";
import type { ServerMetrics } from "./metrics.js";

/** A rate: `requests` per `seconds`. */
export interface RateLimit {
  requests: number;
  seconds: number;
}

/** The limits of {@link createServer}'s `fairShare` option. A limit of 0 (or a null rate) is none. */
export interface FairShareOptions {
  /** Model requests one user may have in flight at once, waiting for their session included. @default 16 */
  userConcurrency?: number;
  /** Model requests one user may send per period. @default { requests: 600, seconds: 60 } */
  userRate?: RateLimit | null;
  /** The same for all users of one API key together (its user id: keys naming one user share it). @default 0 (none) */
  keyConcurrency?: number;
  /** The same for all users of one API key together. @default null (none) */
  keyRate?: RateLimit | null;
  /**
   * How long a refused request is held before its 429 is sent. A client that sends again at once
   * (ignoring Retry-After) then costs one refusal per connection per this long, not thousands a
   * second that would take the CPU from everyone's turns. @default 1000
   */
  refusalDelayMs?: number;
}

/** The limits a server has unless told otherwise: far above what one chat (or one person's few) sends. */
export const DEFAULT_FAIR_SHARE: Required<FairShareOptions> = {
  userConcurrency: 16,
  userRate: { requests: 600, seconds: 60 },
  keyConcurrency: 0,
  keyRate: null,
  refusalDelayMs: 1000,
};

/** What a request is counted as: a turn (a chat's own, or a temporary chat's) or a front-end's side request. */
export type RequestClass = "turn" | "side";

type Scope = "user" | "key";

/** Parses `600/min`, `10/s`, `5000/h`, `600` (per minute); `0` or `off`: none. @throws ThreadkeepError `invalid_request` */
export function parseRate(text: string, name: string): RateLimit | null {
  const value = text.trim().toLowerCase();
  if (value === "off" || value === "0") return null;
  const match = /^(\d+)\s*(?:\/\s*(s|sec|second|m|min|minute|h|hour))?$/.exec(value);
  const requests = match ? Number(match[1]) : Number.NaN;
  if (!match || !Number.isSafeInteger(requests)) {
    throw new ThreadkeepError(
      "invalid_request",
      `${name} must be requests per period, e.g. 600/min, 10/s or off; got "${text}"`,
    );
  }
  const unit = match[2] ?? "min";
  const seconds = unit.startsWith("s") ? 1 : unit.startsWith("h") ? 3600 : 60;
  return { requests, seconds };
}

/** A rate as users write it: `600/min`. */
export function formatRate(rate: RateLimit | null): string {
  if (!rate) return "off";
  const unit =
    rate.seconds === 1 ? "s" : rate.seconds === 3600 ? "h" : rate.seconds === 60 ? "min" : `${rate.seconds}s`;
  return `${rate.requests}/${unit}`;
}

interface Limit {
  scope: Scope;
  concurrency: number;
  rate: RateLimiterMemory | null;
  rateText: string;
}

/** The per-process counts behind the limits. */
export class FairShare {
  readonly #limits: Limit[];
  readonly #inFlight = new Map<string, number>();
  readonly #metrics: ServerMetrics;
  readonly #refusalDelayMs: number;

  constructor(options: FairShareOptions, metrics: ServerMetrics) {
    const o = { ...DEFAULT_FAIR_SHARE, ...options };
    const limit = (scope: Scope, concurrency: number, rate: RateLimit | null): Limit => ({
      scope,
      concurrency: Math.max(0, Math.floor(concurrency)),
      rate: rate && rate.requests > 0 ? new RateLimiterMemory({ points: rate.requests, duration: rate.seconds }) : null,
      rateText: formatRate(rate),
    });
    this.#limits = [limit("user", o.userConcurrency, o.userRate), limit("key", o.keyConcurrency, o.keyRate)].filter(
      (l) => l.concurrency > 0 || l.rate,
    );
    this.#metrics = metrics;
    this.#refusalDelayMs = Math.max(0, o.refusalDelayMs);
  }

  /** True when some limit is on. */
  get enabled(): boolean {
    return this.#limits.length > 0;
  }

  /**
   * Admits one request of `user` (whose API key is `tenant`) or refuses it, after the refusal delay.
   * Concurrency is checked first, so a refused request spends none of the rate.
   * @returns the release, to call once the request is answered.
   * @throws ThreadkeepError `too_many_concurrent_turns` or `rate_limited` (429, with `retryAfterSeconds`)
   */
  async admit(ids: { user: string; tenant: string }, kind: RequestClass): Promise<() => void> {
    const keyOf = (limit: Limit) => `${limit.scope}\n${kind}\n${limit.scope === "user" ? ids.user : ids.tenant}`;
    for (const limit of this.#limits) {
      if (limit.concurrency > 0 && (this.#inFlight.get(keyOf(limit)) ?? 0) >= limit.concurrency) {
        await this.#refused(limit, kind, "concurrency");
        throw new ThreadkeepError(
          "too_many_concurrent_turns",
          `Too many ${what(kind)} in flight for this ${who(limit.scope)}: at most ${limit.concurrency} at once. Retry when one has finished.`,
          // The server cannot know when a turn ends; a second is a polite first back-off.
          { details: { retryAfterSeconds: 1 } },
        );
      }
    }
    for (const limit of this.#limits) {
      if (!limit.rate) continue;
      try {
        await limit.rate.consume(keyOf(limit));
      } catch (error) {
        if (!(error instanceof RateLimiterRes)) throw error;
        await this.#refused(limit, kind, "rate");
        const seconds = Math.max(1, Math.ceil((error.msBeforeNext - this.#refusalDelayMs) / 1000));
        throw new ThreadkeepError(
          "rate_limited",
          `Rate limit reached for this ${who(limit.scope)}: ${limit.rateText} ${what(kind)}. Retry in ${seconds} s.`,
          { details: { retryAfterSeconds: seconds } },
        );
      }
    }
    const keys = this.#limits.filter((l) => l.concurrency > 0).map(keyOf);
    for (const key of keys) this.#inFlight.set(key, (this.#inFlight.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const key of keys) {
        const left = (this.#inFlight.get(key) ?? 1) - 1;
        if (left > 0) this.#inFlight.set(key, left);
        else this.#inFlight.delete(key);
      }
    };
  }

  /** Counts a refusal, then holds it for the refusal delay. */
  async #refused(limit: Limit, kind: RequestClass, what: "concurrency" | "rate"): Promise<void> {
    this.#metrics.fairShareRefusals.inc({ limit: `${limit.scope}_${what}`, kind });
    if (this.#refusalDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.#refusalDelayMs));
  }
}

const what = (kind: RequestClass) => (kind === "turn" ? "turns" : "side requests");
const who = (scope: Scope) => (scope === "user" ? "user" : "API key");

/**
 * Runs `fn` admitted by `fairShare` (when there is one), released when it has answered: a stream when
 * its last event is sent.
 */
export async function withFairShare<T>(
  fairShare: FairShare | undefined,
  request: FastifyRequest,
  kind: RequestClass,
  fn: () => Promise<T>,
): Promise<T> {
  if (!fairShare?.enabled) return fn();
  const release = await fairShare.admit({ user: request.userId, tenant: request.tenantId }, kind);
  try {
    return await fn();
  } finally {
    release();
  }
}
