/**
 * History writes of the Redis store (appends and tail replacements), each one script: the write, the
 * session's activity and expiry, on a single Redis the session indexes when the owner is known, and,
 * with `releaseLease`, the release of the writer's turn lease once the write applies. A proxied
 * turn's commit is then one round trip.
 */
import { SessionNotFoundError, ThreadkeepError } from "../../core/errors.js";
import { validateMessages } from "../../core/messages.js";
import type { Message, MessageInput, ReplaceOptions } from "../../core/types.js";
import {
  checkHistoryOptions,
  checkReplaceTarget,
  historyConflict,
  operationConflict,
  operationDigest,
} from "../history.js";
import { APPEND, APPEND_HANDOVER } from "./_append.js";
import { json, parseMessages, type RedisKeys } from "./_codec.js";
import type { RedisConnection } from "./_connection.js";
import { WRITE } from "./_history.js";
import type { RedisIndexes } from "./_session-index.js";
import type { RedisLeases } from "./_lease.js";

/** What a history write needs of its store. */
export interface RedisWriter {
  db: RedisConnection;
  keys: RedisKeys;
  indexes: RedisIndexes;
  leases: RedisLeases;
  ttlMs: number;
}

type Reply = [number, ...unknown[]];

/** Trailing empty options are left out: a plain append sends few. */
function trimmed(args: string[]): string[] {
  while (args[args.length - 1] === "") args.pop();
  return args;
}

/** KEYS of APPEND: meta and msgs, the indexes when it records them, then sums and fence when asked for. */
function appendKeys(w: RedisWriter, id: string, indexOwner: string, extra: boolean): string[] {
  const base = w.keys.base(id);
  const keys = [`${base}meta`, `${base}msgs`];
  if (indexOwner) keys.push(...w.indexes.keysFor(indexOwner));
  if (extra) keys.push(`${base}sums`, `${base}fence`);
  return keys;
}

/**
 * A message as stored, without its seq (the script puts it first): its JSON with `createdAt` last. A
 * plain object without `seq` or `createdAt` of its own (the common case) is serialised as it is and
 * `createdAt` appended, saving the two copies that dropping them takes.
 */
function messageBody(input: MessageInput, now: number): string {
  if (
    Object.getPrototypeOf(input) === Object.prototype &&
    !("seq" in input) &&
    !("createdAt" in input) &&
    !("toJSON" in input)
  ) {
    const text = json(input, "invalid_message", "A message");
    return text === "{}" ? `{"createdAt":${now}}` : `${text.slice(0, -1)},"createdAt":${now}}`;
  }
  const { seq: _seq, createdAt: _createdAt, ...rest } = input as Partial<Message>;
  return json({ ...rest, createdAt: now }, "invalid_message", "A message");
}

/** A stale fence: a newer lease was granted on the session. */
export function leaseExpired(id: string): ThreadkeepError {
  return new ThreadkeepError("lease_expired", `The turn lease of session ${id} expired and was taken over`);
}

/**
 * An append (`seq` undefined) or a tail replacement, idempotent with an operation id: one script (a
 * plain append the lean APPEND, anything else WRITE), followed by a second step for the indexes only
 * where the script could not update them (a Cluster, or an owner not known up front).
 */
export async function writeHistory(
  w: RedisWriter,
  id: string,
  seq: number | undefined,
  inputs: MessageInput[],
  options: ReplaceOptions,
): Promise<Message[]> {
  const valid = validateMessages(inputs);
  checkHistoryOptions(options, seq);
  const now = Date.now();
  const bodies = valid.map((input) => messageBody(input, now));
  const digest = options.operationId === undefined ? "" : operationDigest(seq ?? null, valid);
  const branchMeta =
    options.branch?.metadata === undefined ? "" : json(options.branch.metadata, "invalid_request", "Branch metadata");
  const fence = options.fence;
  // The lease this write gives back: only one held here, whose token the script checks.
  const holder = fence === undefined ? undefined : w.leases.holder(id, fence);
  const token = options.releaseLease && holder ? holder.token : "";
  // On a single Redis the script records the activity itself when it knows whose index to name
  // (it checks the session is that owner's); in a Cluster the indexes live on other slots.
  const indexOwner = w.db.cluster ? "" : (options.owner?.userId ?? holder?.owner ?? "");
  // In the order of APPEND_OPTIONS and WRITE_OPTIONS, which share their first eight.
  const args = [
    String(bodies.length),
    ...bodies,
    String(now),
    String(w.ttlMs),
    String(Math.max(0, Math.floor(options.maxMessages ?? 0))),
    indexOwner,
    id,
    options.owner?.userId ?? "",
    options.owner?.activeSince === undefined ? "" : String(options.owner.activeSince),
    fence === undefined ? "" : String(fence),
  ];
  let reply: Reply | undefined;
  // A guarded write (sessionCreatedAt) is WRITE's too: the lean script checks no incarnation.
  if (seq === undefined && !options.operationId && !token && options.sessionCreatedAt === undefined) {
    // A plain append: the lean script, unless it hands the write over (see `redis/_append.ts`).
    reply = await w.db.eval<Reply>(
      APPEND,
      appendKeys(w, id, indexOwner, fence !== undefined || !!options.keepUnsummarized),
      trimmed([...args, unsummarizedArg(options)]),
    );
    if (reply[0] === APPEND_HANDOVER) reply = undefined;
  }
  if (!reply) {
    const keys = w.keys.data(id);
    if (indexOwner) keys.push(...w.indexes.keysFor(indexOwner));
    if (token) keys.push(...w.keys.lease(id).slice(0, 2), w.keys.wake(id));
    args.push(
      token,
      options.operationId ?? "",
      digest,
      seq === undefined ? "" : String(seq),
      options.expectedLastSeq === undefined ? "" : String(options.expectedLastSeq),
      options.branch?.reason ?? "",
      branchMeta,
      unsummarizedArg(options),
      options.sessionCreatedAt === undefined ? "" : String(options.sessionCreatedAt),
    );
    reply = await w.db.eval<Reply>(WRITE, keys, trimmed(args));
  }
  switch (reply[0]) {
    case -1:
      throw new SessionNotFoundError(id);
    case -2:
      throw leaseExpired(id);
    case -3:
      throw operationConflict(options.operationId!);
    case -4:
      checkReplaceTarget(seq!, Number(reply[1]), Number(reply[2]), options.expectedLastSeq);
      throw historyConflict(`seq ${seq} cannot be replaced`);
    case -5: {
      const next = reply[1] as string | null;
      if (next !== null) w.leases.releasedByWrite(id, fence!, next || null);
      return parseMessages(id, reply.slice(2) as string[]);
    }
  }
  // `next`: the next waiter's token ('' none), null when no lease was released (absent from APPEND's reply).
  const [firstSeq, lastActivityAt, userId, indexed, next] = reply as [
    number,
    string,
    string,
    number,
    string | null | undefined,
  ];
  if (next != null) w.leases.releasedByWrite(id, fence!, next || null);
  // The write has applied: from here on it succeeds, whatever happens to the index update.
  if (indexed !== 1) await w.indexes.recordAfterWrite(id, userId, Number(lastActivityAt), "gt");
  else w.indexes.settled(id);
  // The stored item's form ({"seq":…, then the body's fields}): one parse, no copy.
  return bodies.map((body, i) => JSON.parse(`{"seq":${firstSeq + i},${body.slice(1)}`) as Message);
}

/**
 * The scripts' `unsummarized` argument: '' (a plain cap), '1' (`keepUnsummarized`), or '1:<n>' with
 * the ceiling `hardCap` past which the oldest go whatever the summaries reach (see PUSH_AND_CAP).
 */
function unsummarizedArg(options: ReplaceOptions): string {
  if (!options.keepUnsummarized) return "";
  const hard = Math.max(0, Math.floor(options.hardCap ?? 0));
  return hard > 0 ? `1:${hard}` : "1";
}
