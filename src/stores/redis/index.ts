import { SessionNotFoundError, StateConflictError, ThreadkeepError } from "../../core/errors.js";
import type {
  FullStore,
  VectorStore,
  UserMemoryVectorStore,
  AppendOptions,
  MessageInput,
  MessageQuery,
  SearchQuery,
  SessionInput,
  SessionState,
  Summary,
  SummaryInput,
  Branch,
  ReplaceOptions,
} from "../../core/types.js";
import { branchFromRecord, branchNotFound, checkReplaceTarget, historyConflict } from "../history.js";
import {
  isExpired,
  json,
  parseJson,
  parseMessages,
  parseState,
  parseSummaries,
  redisKeys,
  toSession,
} from "./_codec.js";
import { RedisConnection } from "./_connection.js";
import * as H from "./_history.js";
import { RedisIndexes } from "./_session-index.js";
import { LEASE_HEARTBEAT_GRACE_MS, RedisLeases } from "./_lease.js";
import * as L from "./_lease-scripts.js";
import type { RedisStoreOptions } from "./_options.js";
import { liveRead as liveReadOf, readMessageRanges, readMessages } from "./_read.js";
import * as S from "./_scripts.js";
import { searchMessages } from "./_search.js";
import { openRedisTurn, TURN_OPEN, turnOpenArgs } from "./_turn.js";
import { redisVectorSidecar } from "./_vectors.js";
import { redisUserMemories } from "./_user-memories.js";
import { leaseExpired, writeHistory } from "./_write.js";
import { sidecarVectors } from "../_vector-sidecar.js";
import { sessionFromInput } from "../_util.js";

export type { RedisStoreOptions } from "./_options.js";

/** The backend name of the Redis store. */
export const REDIS_STORE_NAME = "redis";

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
 * @example
 * ```ts
 * import { createMemory } from "threadkeep";
 * import { createRedisStore } from "threadkeep/stores/redis"; // npm install redis
 *
 * const memory = createMemory({ store: createRedisStore({ url: "redis://127.0.0.1:6379" }) });
 * ```
 */
export function createRedisStore(options: RedisStoreOptions): FullStore & VectorStore & UserMemoryVectorStore {
  const ttlMs = Math.max(0, options.ttlMs ?? DEFAULT_REDIS_TTL_MS);
  const prefix = options.keyPrefix ?? "threadkeep:";
  const db = new RedisConnection({
    url: options.url,
    commandTimeoutMs: options.commandTimeoutMs ?? 5_000,
    connectTimeoutMs: options.connectTimeoutMs ?? 2_000,
    maxReconnectDelayMs: options.maxReconnectDelayMs ?? 1_000,
    onError: options.onError,
    waitReplicas: options.waitReplicas,
    waitTimeoutMs: options.waitTimeoutMs,
  });

  const keys = redisKeys(prefix);
  const { base, data: dataKeys, lease: leaseKeys, wake: wakeChannel } = keys;
  const run = (script: S.RedisScript, id: string, args: (string | number)[]) =>
    db.eval<Reply>(script, dataKeys(id), args.map(String));

  // Where a session past its TTL is checked for (see GONE): what each script or read is given.
  const since = () => S.goneBefore(ttlMs);
  const liveRead = <T>(id: string, command: string[], empty: T): Promise<T> =>
    liveReadOf<T>(db, dataKeys(id)[0], ttlMs, command, empty);

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

  const indexes = new RedisIndexes(
    db,
    prefix,
    ttlMs,
    readSessions,
    options.onWarning ?? ((message) => console.warn(message)),
  );
  const vectorSidecar = redisVectorSidecar(db, base, prefix, ttlMs);

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
        const reply = await db.eval<unknown[]>(TURN_OPEN, turnKeys, [
          ...args.map(String),
          ...turnOpenArgs(opening, since()),
        ]);
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
      const [, next] = await db.eval<[number, string?]>(L.LEASE_RELEASE, [...leaseKeys(id), wakeChannel(id)], [token]);
      return next || null;
    },
    watch: (id, onWake) => db.listen(wakeChannel(id), onWake),
    unwatch: (id) => db.unlisten(wakeChannel(id)),
  });

  const writer = { db, keys, indexes, leases, ttlMs };

  const store: FullStore & VectorStore & UserMemoryVectorStore = {
    name: REDIS_STORE_NAME,
    capabilities: {
      persistent: true,
      fullTextSearch: false,
      crossProcessLease: true,
      nativeExpiry: ttlMs > 0,
      vectors: true,
      ownerScope: true,
      combinedTurn: true,
      guardedAppends: true,
      idempotentWrites: true,
    },
    ...sidecarVectors(() => store, vectorSidecar),
    ...redisUserMemories(db, prefix),

    async createSession(input: SessionInput) {
      const session = sessionFromInput(input);
      const metadata = json(session.metadata, "invalid_request", "Session metadata");
      const args = [session.userId, session.createdAt, session.lastActivityAt, metadata, ttlMs, since()];
      const created = await db.eval<number>(S.CREATE, dataKeys(session.id), args.map(String));
      if (created !== 1) throw new ThreadkeepError("session_exists", `Session ${input.id} already exists`);
      await indexes.recordAfterWrite(session.id, session.userId, session.lastActivityAt, "new");
      return session;
    },

    async getSession(id) {
      return (await store.getSessions([id]))[0];
    },

    async getSessions(ids) {
      // One HMGET a session, sent at once so the client pipelines them (on a cluster, to each session's node).
      const sessions = await readSessions([...ids]);
      const now = Date.now();
      // Past its TTL a session is gone, as on the other stores, though Redis keeps its keys for the margin.
      return sessions.map((session) => (session && !isExpired(session, ttlMs, now) ? session : null));
    },

    listSessions: (userId, listOptions) => indexes.page(userId, listOptions),

    listAllSessions: (listOptions) => indexes.pageAll(listOptions),

    async deleteSession(id) {
      const deleted = await db.eval<[string, number] | null>(S.DELETE, dataKeys(id), [since()]);
      if (deleted === null) return false;
      await indexes.forget([id], deleted[0]);
      // Past its TTL it was gone already: its keys are deleted all the same, but no session was.
      return deleted[1] === 1;
    },

    async touchSession(id, at) {
      if (at !== undefined && !Number.isFinite(at))
        throw new ThreadkeepError("invalid_request", "touch time must be a finite number");
      const [, userId, lastActivityAt] = need(id, await run(S.TOUCH, id, [at ?? "", Date.now(), ttlMs]));
      // An explicit time may move activity back, which 'gt' would not; 'meta' does, and still never
      // undoes a newer write's update.
      await indexes.recordAfterWrite(id, String(userId), Number(lastActivityAt), at === undefined ? "gt" : "meta");
    },

    async updateSessionMetadata(id, metadata) {
      const reply = need(
        id,
        await run(S.SET_METADATA, id, [json(metadata, "invalid_request", "Session metadata"), since()]),
      );
      const session = toSession(id, reply[1] as (string | null)[]);
      if (!session) throw new SessionNotFoundError(id);
      return session;
    },

    appendMessages: (id: string, inputs: MessageInput[], options: AppendOptions = {}) =>
      writeHistory(writer, id, undefined, inputs, options),

    replaceAfter: (id: string, seq: number, inputs: MessageInput[], options: ReplaceOptions = {}) =>
      writeHistory(writer, id, seq, inputs, options),

    async listBranches(id) {
      const all = await liveRead<string[]>(id, ["HVALS", dataKeys(id)[7]], []);
      return all.map((item) => parseJson<Branch>(id, "branch", item)).sort((a, b) => a.id - b.id);
    },

    async switchBranch(id, branchId, options = {}) {
      for (;;) {
        const stored = await db.send<string | null>(["HGET", dataKeys(id)[7], String(branchId)]);
        if (stored === null) {
          if (!(await store.getSession(id))) throw new SessionNotFoundError(id);
          throw branchNotFound(branchId);
        }
        const target = parseJson<Branch>(id, "branch", stored);
        if (target.parentId !== null)
          throw historyConflict(`Branch ${branchId} splits from branch ${target.parentId}: switch to that one first`);
        const head = H.encodeBranch({ ...target, messages: [] }).slice(0, -2);
        const items = target.messages.map((m) => H.encodeItem(m));
        const reply = need(
          id,
          await run(H.SWITCH, id, [Date.now(), ttlMs, options.fence ?? "", branchId, stored, head, ...items]),
        );
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
      const reply = need(id, await run(H.SAVE_BRANCH, id, [record.id ?? "", H.encodeBranch(branch), since()]));
      return { ...branch, id: reply[0] };
    },

    getMessages: (id: string, query: MessageQuery = {}) => readMessages(db, keys, ttlMs, id, query),

    getMessageRanges: (ranges, owner) => readMessageRanges(db, keys, ttlMs, ranges, owner),

    async countMessages(id) {
      return liveRead(id, ["LLEN", dataKeys(id)[1]], 0);
    },

    async popMessage(id) {
      const reply = need(id, await run(S.POP, id, [since()]));
      return reply[0] === 1 ? parseMessages(id, [reply[1] as string])[0] : null;
    },

    async truncateAfter(id, seq) {
      if (!Number.isFinite(seq)) throw new ThreadkeepError("invalid_request", "seq must be a finite number");
      return need(id, await run(S.TRUNCATE, id, [seq, since()]))[0];
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
      const [summaryId] = need(
        id,
        await run(S.SUMMARY, id, [
          body,
          String(Math.floor(fields.toSeq)),
          input.sessionCreatedAt === undefined ? "" : String(input.sessionCreatedAt),
          since(),
        ]),
      );
      return { id: summaryId, ...fields };
    },

    async listSummaries(id) {
      return parseSummaries(id, await liveRead<string[]>(id, ["LRANGE", dataKeys(id)[2], "0", "-1"], []));
    },

    async getState(id): Promise<SessionState> {
      const [, [version, data]] = need(id, await run(S.GET_STATE, id, [since()])) as [number, (string | null)[]];
      return parseState(id, version, data);
    },

    async setState(id, data, expectedVersion) {
      const body = json(data, "invalid_request", "Session state");
      const reply = need(id, await run(S.SET_STATE, id, [expectedVersion, body, since()]));
      if (reply[0] === -2) throw new StateConflictError(expectedVersion, Number(reply[1]));
      return { version: reply[0], data: JSON.parse(body) };
    },

    search: (query: SearchQuery) => searchMessages(db, keys, indexes, ttlMs, query),

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
