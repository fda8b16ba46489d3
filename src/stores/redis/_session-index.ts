import type { ListOptions, Session, SessionPage } from "../../core/types.js";
import { isExpired } from "./_codec.js";
import type { RedisConnection } from "./_connection.js";
import * as S from "./_scripts.js";
import { DEFAULT_LIST_LIMIT, decodeCursor, encodeCursor } from "../_util.js";

/** Sessions fetched per round trip when listing, searching or expiring. */
export const INDEX_BATCH = 100;

/** First and longest pause before an index update that failed after its write is tried again. */
const RETRY_FIRST_MS = 200;
const RETRY_MAX_MS = 10_000;

/** What `expire()` found for one session: gone already, deleted now, or active after all. */
export type ExpireOutcome =
  { outcome: "gone" } | { outcome: "deleted"; userId: string } | { outcome: "active"; lastActivityAt: number };

/**
 * The session indexes of the Redis store: per owner `…u:<userId>:sessions` (ids by last activity,
 * for listings and search), and two global sorted sets under one hash tag, `…{index}:activity` (for
 * `expire()`) and `…{index}:ids` (all scores 0, so ids come back in byte order for
 * `listAllSessions`). They sit in other hash slots than the sessions, so a session write updates
 * them in a second step, and readers heal them: a member whose session is gone (its keys expired,
 * or a process died between the two steps) is dropped when a listing, search or expiry meets it.
 */
export class RedisIndexes {
  readonly #db: RedisConnection;
  readonly #prefix: string;
  readonly #ttlMs: number;
  readonly #read: (ids: string[]) => Promise<(Session | null)[]>;
  readonly #activity: string;
  readonly #ids: string;
  readonly #warn: (message: string) => void;
  /** Sessions (and their owner when written) whose index update failed after the write, retried in the background. */
  readonly #pending = new Map<string, { userId: string }>();
  #retry: NodeJS.Timeout | undefined;
  #retryMs = RETRY_FIRST_MS;
  #closed = false;

  constructor(
    db: RedisConnection,
    prefix: string,
    ttlMs: number,
    readSessions: (ids: string[]) => Promise<(Session | null)[]>,
    warn: (message: string) => void,
  ) {
    this.#db = db;
    this.#prefix = prefix;
    this.#ttlMs = ttlMs;
    this.#read = readSessions;
    this.#warn = warn;
    this.#activity = `${prefix}{index}:activity`;
    this.#ids = `${prefix}{index}:ids`;
  }

  /** The owner index's key (the owner's id is used verbatim: any string is a valid key). */
  owner(userId: string): string {
    return `${this.#prefix}u:${userId}:sessions`;
  }

  /**
   * The owner's index and the global ones, for a script that records activity in the same step as
   * the write (a single Redis only: in a Cluster they live in other slots than the session).
   */
  keysFor(userId: string): string[] {
    return [this.owner(userId), this.#activity, this.#ids];
  }

  /**
   * Records activity. 'gt' never moves a session back, so concurrent writes leave the newest time;
   * 'new' sets the entries of a session that has none and is 'gt' otherwise (a creation: the update
   * of a write to the new session, landed first, is newer). Each update also trims a bounded number
   * of members older than the TTL, whose sessions Redis has expired.
   */
  record(id: string, userId: string, at: number, mode: "gt" | "new"): Promise<void> {
    const m = mode === "new" ? "=" : mode;
    return this.#record(id, userId, at, m, m);
  }

  /** {@link record} with a mode per script, which may also be '=' and the score the caller read (see `redis/_scripts.ts`). */
  async #record(id: string, userId: string, at: number, ownerMode: string, globalMode: string): Promise<void> {
    const now = Date.now();
    const ttl = this.#ttlMs;
    if (ttl > 0 && at + ttl <= now) return;
    // The owner index outlives the keys of every session in it (see `keysExpireAt`).
    const expireAt = ttl > 0 ? String(S.keysExpireAt(at, ttl)) : "";
    const trimBelow = ttl > 0 ? String(now - ttl) : "";
    await Promise.all([
      this.#db.eval(S.USER_INDEX, [this.owner(userId)], [ownerMode, String(at), id, expireAt, trimBelow]),
      this.#db.eval(S.GLOBAL_INDEX, [this.#activity, this.#ids], [globalMode, String(at), id, trimBelow]),
    ]);
  }

  /**
   * Records the activity of a session write that has already applied. Never fails: the write's outcome
   * is the write's, and a caller told it failed would retry (or report "not saved") a stored write. A
   * failure is reported with the session id and retried in the background until it lands (from the
   * session's activity at that time, see {@link #repair}); until then a listing may place the session
   * by older activity (or miss it, if its member was trimmed as expired), and `expire()` re-checks each
   * session's own activity before deleting anything. Modes as in {@link record}, and 'meta' for a
   * write that may move activity back (an explicit touch): the entries are brought to what the
   * session's meta holds, without undoing an update that lands meanwhile (see {@link #repair}).
   */
  async recordAfterWrite(id: string, userId: string, at: number, mode: "gt" | "new" | "meta"): Promise<void> {
    try {
      if (mode !== "meta") await this.record(id, userId, at, mode);
      else if (!(await this.#repair(id, userId))) {
        // A write came in between: the next round brings the entries to the newer meta.
        this.#pending.set(id, { userId });
        this.#scheduleRetry();
        return;
      }
      this.#pending.delete(id);
    } catch (error) {
      this.#warn(
        `[threadkeep] redis: session ${id} was written, but its index update failed (retrying in the background): ${(error as Error).message}`,
      );
      this.#pending.set(id, { userId });
      this.#scheduleRetry();
    }
  }

  /** A later write of `id` recorded its activity in its own script: nothing is left to retry. */
  settled(id: string): void {
    if (this.#pending.size > 0) this.#pending.delete(id);
  }

  /** Stops retrying (the store is closing). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#retry);
    this.#retry = undefined;
  }

  #scheduleRetry(): void {
    if (this.#retry || this.#closed) return;
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      const due = [...this.#pending];
      Promise.all(
        due.map(async ([id, entry]) => {
          const settled = await this.#repair(id, entry.userId);
          // A newer failure of the same session replaced the entry meanwhile: keep that one.
          if (settled && this.#pending.get(id) === entry) this.#pending.delete(id);
        }),
      ).then(
        () => {
          this.#retryMs = RETRY_FIRST_MS;
          if (this.#pending.size > 0) this.#scheduleRetry();
        },
        () => {
          this.#retryMs = Math.min(this.#retryMs * 2, RETRY_MAX_MS);
          this.#scheduleRetry();
        },
      );
    }, this.#retryMs);
    this.#retry.unref();
  }

  /**
   * Brings a session's index entries to what its meta holds now. The activity the failed update
   * carried may have been overtaken by a newer write (of any process) whose own update landed since;
   * re-applying it would move the session back in its owner's listing, or bring back a deleted one.
   * So the entries are read first, then the meta, and an entry is set to the meta's activity only while
   * it is still what was read (an update landing in between wins: the entry is then never lowered); a
   * session that is gone is removed. Writes update the indexes after their meta, so reading the meta
   * again tells whether one came in between: then the entry is not settled (false) and the next round
   * repairs it from the newer meta.
   */
  async #repair(id: string, userId: string): Promise<boolean> {
    const [ownerScore, activityScore] = await Promise.all([
      this.#db.send<string | null>(["ZSCORE", this.owner(userId), id]),
      this.#db.send<string | null>(["ZSCORE", this.#activity, id]),
    ]);
    const [before] = await this.#read([id]);
    if (!before) await this.forget([id], userId);
    else if (before.userId !== userId) await this.record(id, before.userId, before.lastActivityAt, "gt");
    else await this.#record(id, userId, before.lastActivityAt, `=${ownerScore ?? ""}`, `=${activityScore ?? ""}`);
    const [after] = await this.#read([id]);
    return (
      before?.userId === after?.userId &&
      before?.createdAt === after?.createdAt &&
      before?.lastActivityAt === after?.lastActivityAt
    );
  }

  /** Removes sessions from the global indexes and, when known, from their owner's. */
  async forget(ids: string[], userId: string | null): Promise<void> {
    if (ids.length === 0) return;
    await Promise.all([
      // Together (one hash tag): a session is in both global indexes or in neither (see RECORD).
      this.#db.transaction([
        ["ZREM", this.#activity, ...ids],
        ["ZREM", this.#ids, ...ids],
      ]),
      userId === null ? undefined : this.#db.send(["ZREM", this.owner(userId), ...ids]),
    ]);
  }

  /** Drops members of an owner's index whose session is gone or now belongs to someone else. */
  async dropFromOwner(userId: string, ids: string[]): Promise<void> {
    if (ids.length > 0) await this.#db.send(["ZREM", this.owner(userId), ...ids]);
  }

  /** Every id in an owner's index, most recent activity first. */
  ownedIds(userId: string): Promise<string[]> {
    return this.#db.send<string[]>(["ZRANGE", this.owner(userId), "0", "-1", "REV"]);
  }

  /** One page of an owner's sessions, most recent activity first (ties by id, descending). */
  async page(userId: string, options: ListOptions = {}): Promise<SessionPage> {
    const limit = Math.max(0, options.limit ?? DEFAULT_LIST_LIMIT);
    const cursor = options.cursor ? decodeCursor(options.cursor) : null;
    const max = cursor ? String(cursor.lastActivityAt) : "+inf";
    const found: { session: Session; score: number }[] = [];
    const stale: string[] = [];
    const now = Date.now();
    for (let offset = 0; found.length <= limit; offset += INDEX_BATCH) {
      const flat = await this.#db.send<string[]>([
        "ZRANGE",
        this.owner(userId),
        max,
        "-inf",
        "BYSCORE",
        "REV",
        "LIMIT",
        String(offset),
        String(INDEX_BATCH),
        "WITHSCORES",
      ]);
      const members: { id: string; score: number }[] = [];
      for (let i = 0; i < flat.length; i += 2) {
        const member = { id: flat[i], score: Number(flat[i + 1]) };
        // At the cursor's score, members at or above its id were on earlier pages.
        if (!cursor || member.score < cursor.lastActivityAt || member.id < cursor.id) members.push(member);
      }
      const sessions = await this.#read(members.map((m) => m.id));
      members.forEach((member, i) => {
        const session = sessions[i];
        if (session?.userId !== userId) stale.push(member.id);
        else if (!isExpired(session, this.#ttlMs, now)) found.push({ session, score: member.score });
      });
      if (flat.length < 2 * INDEX_BATCH) break;
    }
    await this.dropFromOwner(userId, stale);
    const shown = found.slice(0, limit);
    const last = shown.at(-1);
    // The cursor holds the index score (the order of the listing), not the session's own field.
    const nextCursor =
      found.length > limit && last ? encodeCursor({ lastActivityAt: last.score, id: last.session.id }) : null;
    return { sessions: shown.map((f) => f.session), nextCursor };
  }

  /** One page of every session, by id in byte order; the cursor is the last id shown. */
  async pageAll(options: ListOptions = {}): Promise<SessionPage> {
    const limit = Math.max(0, options.limit ?? DEFAULT_LIST_LIMIT);
    const found: Session[] = [];
    const stale: string[] = [];
    const now = Date.now();
    let from = options.cursor ? `(${options.cursor}` : "-";
    while (found.length <= limit) {
      const ids = await this.#db.send<string[]>([
        "ZRANGE",
        this.#ids,
        from,
        "+",
        "BYLEX",
        "LIMIT",
        "0",
        String(INDEX_BATCH),
      ]);
      const sessions = await this.#read(ids);
      sessions.forEach((session, i) => {
        if (!session) stale.push(ids[i]);
        else if (!isExpired(session, this.#ttlMs, now)) found.push(session);
      });
      if (ids.length < INDEX_BATCH) break;
      from = `(${ids[ids.length - 1]}`;
    }
    await this.forget(stale, null);
    const shown = found.slice(0, limit);
    const last = shown.at(-1);
    return { sessions: shown, nextCursor: found.length > limit && last ? last.id : null };
  }

  /**
   * Runs `expireOne` on every session the activity index places before `olderThan`; `expireOne`
   * re-checks atomically, since a session may have been active since the index was read.
   * @returns the ids that are gone, including those whose keys Redis had already expired.
   */
  async expire(olderThan: number, expireOne: (id: string) => Promise<ExpireOutcome>): Promise<string[]> {
    const removed: string[] = [];
    for (;;) {
      const ids = await this.#db.send<string[]>([
        "ZRANGE",
        this.#activity,
        "-inf",
        `(${olderThan}`,
        "BYSCORE",
        "LIMIT",
        "0",
        String(INDEX_BATCH),
      ]);
      if (ids.length === 0) return removed;
      await Promise.all(
        ids.map(async (id) => {
          const found = await expireOne(id);
          if (found.outcome === "active") {
            // The index lagged: correct its score so the loop does not meet the session again (GT: a
            // newer write's own update may have landed since the session was checked; XX: nor bring
            // back one forgotten since, which would be in one global index without the other).
            await this.#db.send(["ZADD", this.#activity, "XX", "GT", String(found.lastActivityAt), id]);
            return;
          }
          removed.push(id);
          await this.forget([id], found.outcome === "deleted" ? found.userId : null);
        }),
      );
    }
  }
}
