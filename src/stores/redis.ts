import { SessionNotFoundError, StateConflictError, ThreadkeepError } from "../core/errors.js";
import type {
  VectorStore,
  AppendOptions,
  MessageInput,
  MessageQuery,
  SearchHit,
  SearchQuery,
  SessionInput,
  SessionState,
  Summary,
  SummaryInput,
  Branch,
  ReplaceOptions,
} from "../core/types.js";
import { branchFromRecord, branchNotFound, checkReplaceTarget, historyConflict } from "./_history.js";
import { json, parseJson, parseMessages, parseState, parseSummaries, redisKeys, toSession } from "./_redis-codec.js";
import { RedisConnection } from "./_redis-connection.js";
import * as H from "./_redis-history.js";
import { INDEX_BATCH, RedisIndexes } from "./_redis-index.js";
import { LEASE_HEARTBEAT_GRACE_MS, RedisLeases } from "./_redis-lease.js";
import * as L from "./_redis-lease-scripts.js";
import * as S from "./_redis-scripts.js";
import { openRedisTurn, TURN_OPEN, turnOpenArgs } from "./_redis-turn.js";
import { leaseExpired, writeHistory } from "./_redis-write.js";
import { decodeStoredVector, encodeStoredVector, sidecarVectors, type VectorSidecar } from "./_vector-sidecar.js";
import type { StoredVector } from "./_vectors.js";
import {
  checkOwner,
  checkSearchQuery,
  DEFAULT_SEARCH_LIMIT,
  rankHits,
  seqBounds,
  sessionFromInput,
  substringHits,
} from "./_util.js";

/** The backend name of the Redis store. */
export const REDIS_STORE_NAME = "redis";

/** Options of {@link createRedisStore}. */
export interface RedisStoreOptions {
  /**
   * `redis://[[user][:password]@]host[:port][/db]` or `rediss://…`; for a Redis Cluster,
   * `redis+cluster://[[user]:password@]host:port,host:port` (any reachable nodes: the rest are discovered).
   */
  url: string;
  /**
   * Sessions inactive this long expire by themselves: every key of a session expires at
   * `lastActivityAt + ttlMs`, moved on every append and touch. 0 keeps sessions until deleted or
   * `expire()`d. @default 604800000 (7 days)
   */
  ttlMs?: number;
  /** Prepended to every key, so several applications (or test files) can share one server. @default "threadkeep:" */
  keyPrefix?: string;
  /** Longest wait for one reply before the call fails with `store_unavailable`. @default 5000 */
  commandTimeoutMs?: number;
  /**
   * Longest wait for a (re)connection, counted from the start of an outage; after it, calls fail with
   * `store_unavailable` at once until the server is back. @default 2000
   */
  connectTimeoutMs?: number;
  /** Longest pause between reconnection attempts (the backoff doubles from 50 ms). @default 1000 */
  maxReconnectDelayMs?: number;
  /** Receives connection errors (the client reconnects by itself; calls report outages as errors). @default ignored */
  onError?: (error: Error) => void;
  /**
   * Receives warnings: a session index update that failed after its write applied (the write still
   * succeeds; the update is retried in the background). @default console.warn
   */
  onWarning?: (message: string) => void;
}

/**
 * LRANGE bounds of a read without seq bounds: the last N, else the first `limit`, else all. One LRANGE
 * suffices because every stored message carries its seq.
 */
function unrangedWindow(last: number | undefined, limit: number | undefined): [string, string] {
  if (last !== undefined && Number.isFinite(last)) return [String(-last), "-1"];
  if (limit !== undefined && Number.isFinite(limit)) return ["0", String(limit - 1)];
  return ["0", "-1"];
}

/** Default inactivity expiry of the Redis store: 7 days. */
export const DEFAULT_REDIS_TTL_MS = 7 * 86_400_000;
/** How long the waiting line's keys outlive the last waiter's poll. */
const QUEUE_HOUSEKEEPING_MS = 60_000;
/** A stale holder paused longer than this is no longer fenced out (the fence key is gone). */
const FENCE_RETENTION_MS = 86_400_000;

type Reply = [number, ...unknown[]];

/**
 * A store on Redis (or Redis Cluster key layout). Keys of session `<id>` share the hash tag `{<id>}`:
 * `…s:{<id>}:meta` (hash), `:msgs` (list of JSON, oldest first, each carrying its seq), `:sums`,
 * `:state`, the lease keys `:lease`, `:queue`, `:alive`, `:qseq`, `:fence`, and the wake channel
 * `:wake`. Every write is one Lua script on those keys. Two sorted sets index sessions by last
 * activity: `…u:<userId>:sessions` per owner and `…activity` for `expire()`. They live in other hash
 * slots: on a single Redis a history write whose owner is known records them in its own script; in a
 * Cluster (and otherwise) they are updated right after the session's script. Readers keep them honest:
 * a listing or search drops members whose session is gone (expired keys, or a crash between the two
 * steps), and `expire()` removes what it deletes.
 *
 * A proxied turn is two round trips (`combinedTurn`): `openTurn` is the lease poll that, when it
 * grants, also reads the session, its window, summaries and state; the commit (`releaseLease`)
 * appends, refreshes activity and expiry, and releases the lease in one script. Requires Redis 7.0 or
 * newer (PEXPIRETIME, ZADD GT).
 */
export function createRedisStore(options: RedisStoreOptions): VectorStore {
  const ttlMs = Math.max(0, options.ttlMs ?? DEFAULT_REDIS_TTL_MS);
  const prefix = options.keyPrefix ?? "threadkeep:";
  const db = new RedisConnection({
    url: options.url,
    commandTimeoutMs: options.commandTimeoutMs ?? 5_000,
    connectTimeoutMs: options.connectTimeoutMs ?? 2_000,
    maxReconnectDelayMs: options.maxReconnectDelayMs ?? 1_000,
    onError: options.onError,
  });

  const keys = redisKeys(prefix);
  const { base, data: dataKeys, lease: leaseKeys, wake: wakeChannel } = keys;
  const run = (script: S.RedisScript, id: string, args: (string | number)[]) =>
    db.eval<Reply>(script, dataKeys(id), args.map(String));

  const need = (id: string, reply: Reply): Reply => {
    if (reply[0] === -1) throw new SessionNotFoundError(id);
    return reply;
  };

  const readSessions = (ids: string[]) =>
    Promise.all(
      ids.map(async (id) =>
        toSession(id, await db.send<(string | null)[]>(["HMGET", dataKeys(id)[0], ...S.META_FIELDS])),
      ),
    );

  const indexes = new RedisIndexes(db, prefix, ttlMs, readSessions, options.onWarning ?? ((message) => console.warn(message)));

  // Vectors: a hash per session under its hash tag (seq → vector line), expiring with the session's
  // TTL; a global hash of each model's dimensions.
  const modelsKey = `${prefix}embedding-models`;
  const vectorSidecar: VectorSidecar = {
    async read(id) {
      const fields = await db.send<string[]>(["HGETALL", `${base(id)}vec`]);
      const out: StoredVector[] = [];
      for (let i = 1; i < fields.length; i += 2) {
        const v = decodeStoredVector(fields[i]);
        if (v) out.push(v);
      }
      return out;
    },
    async write(id, vectors) {
      const key = `${base(id)}vec`;
      await db.send(["HSET", key, ...vectors.flatMap((v) => [String(v.seq), encodeStoredVector(v)])]);
      if (ttlMs > 0) await db.send(["PEXPIRE", key, String(ttlMs)]);
    },
    async dims(model) {
      const dims = await db.send<string | null>(["HGET", modelsKey, model]);
      return dims === null ? undefined : Number(dims);
    },
    async claimDims(model, dims) {
      await db.send(["HSETNX", modelsKey, model, String(dims)]);
      return Number(await db.send<string>(["HGET", modelsKey, model]));
    },
  };

  const leases = new RedisLeases({
    async poll(id, token, leaseTtlMs, opening) {
      const args = [
        token,
        leaseTtlMs,
        LEASE_HEARTBEAT_GRACE_MS,
        QUEUE_HOUSEKEEPING_MS,
        Math.max(FENCE_RETENTION_MS, 2 * leaseTtlMs),
      ];
      if (opening) {
        // The turn's reads ride on the poll: the one that grants reads the session's data too.
        const turnKeys = [...leaseKeys(id), ...dataKeys(id).slice(0, 4)];
        const reply = await db.eval<unknown[]>(TURN_OPEN, turnKeys, [...args.map(String), ...turnOpenArgs(opening)]);
        return { granted: reply[0] === 1, value: Number(reply[1]), read: reply.slice(2) };
      }
      const [granted, value] = await db.eval<[number, number]>(L.LEASE_POLL, leaseKeys(id), args.map(String));
      return { granted: granted === 1, value: Number(value) };
    },
    async leave(id, token) {
      await db.eval(L.LEASE_LEAVE, leaseKeys(id), [token]);
    },
    async renew(id, token, leaseTtlMs, fence) {
      return (await db.eval<number>(L.LEASE_RENEW, leaseKeys(id), [token, String(leaseTtlMs), String(fence)])) === 1;
    },
    async release(id, token) {
      const [, next] = await db.eval<[number, string?]>(
        L.LEASE_RELEASE,
        [...leaseKeys(id), wakeChannel(id)],
        [token],
      );
      return next || null;
    },
    watch: (id, onWake) => db.listen(wakeChannel(id), onWake),
    unwatch: (id) => db.unlisten(wakeChannel(id)),
  });

  const writer = { db, keys, indexes, leases, ttlMs };

  const store: VectorStore = {
    name: REDIS_STORE_NAME,
    capabilities: {
      persistent: true,
      fullTextSearch: false,
      crossProcessLease: true,
      nativeExpiry: ttlMs > 0,
      vectors: true,
      ownerScope: true,
      combinedTurn: true,
      keepUnsummarized: true,
      guardedSummaries: true,
    },
    ...sidecarVectors(() => store, vectorSidecar),

    async createSession(input: SessionInput) {
      const session = sessionFromInput(input);
      const metadata = json(session.metadata, "invalid_request", "Session metadata");
      const args = [session.userId, session.createdAt, session.lastActivityAt, metadata, ttlMs];
      const created = await db.eval<number>(S.CREATE, dataKeys(session.id), args.map(String));
      if (created !== 1) throw new ThreadkeepError("session_exists", `Session ${input.id} already exists`);
      await indexes.recordAfterWrite(session.id, session.userId, session.lastActivityAt, "set");
      return session;
    },

    async getSession(id) {
      const [session] = await readSessions([id]);
      return session;
    },

    listSessions: (userId, listOptions) => indexes.page(userId, listOptions),

    listAllSessions: (listOptions) => indexes.pageAll(listOptions),

    async deleteSession(id) {
      const userId = await db.eval<string | null>(S.DELETE, dataKeys(id), []);
      if (userId === null) return false;
      await indexes.forget([id], userId);
      return true;
    },

    async touchSession(id, at) {
      if (at !== undefined && !Number.isFinite(at))
        throw new ThreadkeepError("invalid_request", "touch time must be a finite number");
      const [, userId, lastActivityAt] = need(id, await run(S.TOUCH, id, [at ?? "", Date.now(), ttlMs]));
      await indexes.recordAfterWrite(id, String(userId), Number(lastActivityAt), at === undefined ? "gt" : "set");
    },

    async updateSessionMetadata(id, metadata) {
      const reply = need(
        id,
        await run(S.SET_METADATA, id, [json(metadata, "invalid_request", "Session metadata")]),
      );
      const session = toSession(id, reply[1] as (string | null)[]);
      if (!session) throw new SessionNotFoundError(id);
      return session;
    },

    appendMessages: (id: string, inputs: MessageInput[], options: AppendOptions = {}) => writeHistory(writer, id, undefined, inputs, options),

    replaceAfter: (id: string, seq: number, inputs: MessageInput[], options: ReplaceOptions = {}) => writeHistory(writer, id, seq, inputs, options),

    async listBranches(id) {
      const all = await db.send<string[]>(["HVALS", dataKeys(id)[7]]);
      return all.map((item) => parseJson<Branch>(id, "branch", item)).sort((a, b) => a.id - b.id);
    },

    async switchBranch(id, branchId, options = {}) {
      for (;;) {
        const stored = await db.send<string | null>(["HGET", dataKeys(id)[7], String(branchId)]);
        if (stored === null) {
          if (!(await db.send<number>(["EXISTS", dataKeys(id)[0]]))) throw new SessionNotFoundError(id);
          throw branchNotFound(branchId);
        }
        const target = parseJson<Branch>(id, "branch", stored);
        if (target.parentId !== null) throw historyConflict(`Branch ${branchId} splits from branch ${target.parentId}: switch to that one first`);
        const head = H.encodeBranch({ ...target, messages: [] }).slice(0, -2);
        const items = target.messages.map((m) => H.encodeItem(m));
        const reply = need(id, await run(H.SWITCH, id, [Date.now(), ttlMs, options.fence ?? "", branchId, stored, head, ...items]));
        if (reply[0] === -6) continue;
        if (reply[0] === -2) throw leaseExpired(id);
        if (reply[0] === -4) {
          checkReplaceTarget(target.atSeq, Number(reply[1]), Number(reply[2]));
          throw historyConflict(`Branch ${branchId} cannot be switched to`);
        }
        const [, lastActivityAt, userId, ...tail] = reply as [number, string, string, ...string[]];
        await indexes.recordAfterWrite(id, userId, Number(lastActivityAt), "gt");
        return { ...target, messages: parseMessages(id, tail) };
      }
    },

    async saveBranch(id, record) {
      const branch = branchFromRecord(record, 0);
      const reply = need(id, await run(H.SAVE_BRANCH, id, [record.id ?? "", H.encodeBranch(branch)]));
      return { ...branch, id: reply[0] };
    },

    async getMessages(id: string, query: MessageQuery = {}) {
      const ranged = [query.afterSeq, query.beforeSeq, query.fromSeq, query.toSeq].some(
        (b) => b !== undefined,
      );
      const last = query.last === undefined ? undefined : Math.trunc(query.last);
      const limit = query.limit === undefined ? undefined : Math.trunc(query.limit);
      if (last !== undefined && last <= 0) return [];
      if (last === undefined && limit !== undefined && limit <= 0) return [];
      let items: string[];
      if (query.owner && !ranged) {
        // Owner-scoped "last N" (the hot read): the owner and activity and the window in one MULTI on the
        // session's slot, atomic like a script but cheaper on the server; the owner is checked before
        // anything read leaves this function.
        const [meta, read] = await db.transaction<[(string | null)[], string[]]>([
          ["HMGET", dataKeys(id)[0], "userId", "lastActivityAt"],
          ["LRANGE", dataKeys(id)[1], ...unrangedWindow(last, limit)],
        ]);
        checkOwner(id, query.owner, meta[0] == null ? null : { userId: meta[0], lastActivityAt: Number(meta[1]) });
        items = read;
      } else if (query.owner) {
        // Owner-scoped with seq bounds: the owner and expiry are checked in the script that reads.
        const [from, to] = seqBounds(query);
        const reply = await db.eval<(number | string)[]>(S.OWNED_RANGE, dataKeys(id), [
          query.owner.userId,
          query.owner.activeSince === undefined ? "" : String(query.owner.activeSince),
          ranged ? String(from) : "",
          ranged ? String(to) : "",
          last === undefined ? "" : String(last),
          limit === undefined ? "" : String(limit),
        ]);
        if (reply[0] === -1) throw new SessionNotFoundError(id);
        items = reply.slice(1) as string[];
      } else if (ranged) {
        const [from, to] = seqBounds(query);
        items = await db.eval<string[]>(S.RANGE, dataKeys(id), [
          String(from),
          String(to),
          last === undefined ? "" : String(last),
          limit === undefined ? "" : String(limit),
        ]);
      } else {
        items = await db.send<string[]>(["LRANGE", dataKeys(id)[1], ...unrangedWindow(last, limit)]);
      }
      return parseMessages(id, items);
    },

    async countMessages(id) {
      return db.send<number>(["LLEN", dataKeys(id)[1]]);
    },

    async popMessage(id) {
      const reply = need(id, await run(S.POP, id, []));
      return reply[0] === 1 ? parseMessages(id, [reply[1] as string])[0] : null;
    },

    async truncateAfter(id, seq) {
      if (!Number.isFinite(seq)) throw new ThreadkeepError("invalid_request", "seq must be a finite number");
      return need(id, await run(S.TRUNCATE, id, [seq]))[0];
    },

    async saveSummary(id: string, input: SummaryInput) {
      const fields: Omit<Summary, "id"> = {
        fromSeq: input.fromSeq,
        toSeq: input.toSeq,
        content: input.content,
        createdAt: input.createdAt ?? Date.now(),
        ...(input.metadata ? { metadata: structuredClone(input.metadata) } : {}),
      };
      const body = json(fields, "invalid_request", "A summary");
      const [summaryId] = need(id, await run(S.SUMMARY, id, [body, String(Math.floor(fields.toSeq)), input.sessionCreatedAt === undefined ? "" : String(input.sessionCreatedAt)]));
      return { id: summaryId, ...fields };
    },

    async listSummaries(id) {
      return parseSummaries(id, await db.send<string[]>(["LRANGE", dataKeys(id)[2], "0", "-1"]));
    },

    async getState(id): Promise<SessionState> {
      const [, [version, data]] = need(id, await run(S.GET_STATE, id, [])) as [number, (string | null)[]];
      return parseState(id, version, data);
    },

    async setState(id, data, expectedVersion) {
      const body = json(data, "invalid_request", "Session state");
      const reply = need(id, await run(S.SET_STATE, id, [expectedVersion, body]));
      if (reply[0] === -2) throw new StateConflictError(expectedVersion, Number(reply[1]));
      return { version: reply[0], data: JSON.parse(body) };
    },

    async search(query: SearchQuery) {
      checkSearchQuery(query);
      if (query.mode === "fulltext") {
        throw new ThreadkeepError("not_supported", "The redis store has no full-text search; use substring");
      }
      const ids = query.sessionId ? [query.sessionId] : await indexes.ownedIds(query.userId);
      const hits: SearchHit[] = [];
      const stale: string[] = [];
      for (let at = 0; at < ids.length; at += INDEX_BATCH) {
        const batch = ids.slice(at, at + INDEX_BATCH);
        const owners = await Promise.all(
          batch.map((id) => db.send<string | null>(["HGET", dataKeys(id)[0], "userId"])),
        );
        const mine = batch.filter((_, i) => owners[i] === query.userId);
        // Members of the owner's index that are gone, or whose id now belongs to someone else.
        if (!query.sessionId) stale.push(...batch.filter((_, i) => owners[i] !== query.userId));
        const lists = await Promise.all(
          mine.map((id) => db.send<string[]>(["LRANGE", dataKeys(id)[1], "0", "-1"])),
        );
        mine.forEach((sessionId, i) => {
          hits.push(...substringHits(sessionId, parseMessages(sessionId, lists[i]), query.text));
        });
      }
      await indexes.dropFromOwner(query.userId, stale);
      return rankHits(hits, query.limit ?? DEFAULT_SEARCH_LIMIT);
    },

    expire: (olderThan) =>
      indexes.expire(olderThan, async (id) => {
        const [outcome, userId, lastActivityAt] = await run(S.EXPIRE_ONE, id, [olderThan]);
        if (outcome === 1) return { outcome: "deleted", userId: String(userId) };
        if (outcome === 2) return { outcome: "active", lastActivityAt: Number(lastActivityAt) };
        return { outcome: "gone" };
      }),

    async acquireLease(id, leaseOptions) {
      return leases.acquire(id, leaseOptions);
    },

    openTurn: (id, opening) => openRedisTurn(leases, id, opening),

    async close() {
      indexes.close();
      await leases.close();
      await db.close();
    },
  };
  return store;
}
