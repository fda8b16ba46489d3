/**
 * Migration: copies every session (messages, summaries, state, branches, times), then every user's
 * memories (with their history and source), between any two stores, a few at a time. A session
 * already in the target is skipped or completed, a memory skipped when identical, so an interrupted
 * run is finished by running it again; the run ends by checking what the target holds against the
 * source. What each capability of the contract carries is in capabilities.ts.
 */
import { iterateAllSessions } from "../core/enumerate.js";
import { completeStore } from "../core/store/complete.js";
import type { Session, FullStore, SessionStore } from "../core/types.js";
import { sameData } from "./canonical.js";
import { importUserMemory, memoryOwners, type MemoryOutcome, storedMemory, userMemories } from "./user-memory-copy.js";
import { forEachConcurrent, type ImportOutcome, importSessionBundle, readSessionBundle } from "./session-copy.js";

/** Options of {@link migrateStores}. */
export interface MigrateOptions {
  /** Only this owner's sessions and memories. @default every session and every user's memories */
  userId?: string;
  /** Sessions copied at once. @default 16 */
  concurrency?: number;
  /** Sessions listed per call. @default 500 */
  pageSize?: number;
  /** Count the target against the source at the end. @default true */
  verify?: boolean;
  /** Stops taking new sessions; those in flight finish, so a re-run resumes cleanly. */
  signal?: AbortSignal;
  /** Called once the sessions are listed, with how many there are. */
  onStart?: (total: number) => void;
  /** Called after each session, with the sessions done and their messages so far. */
  onProgress?: (done: { sessions: number; messages: number }) => void;
}

/** What a migration did. */
export interface MigrateReport {
  total: number;
  counts: Record<ImportOutcome["status"], number>;
  /** Messages written to the target by this run. */
  messagesCopied: number;
  /** Messages of the sessions processed (copied or already there). */
  messagesSeen: number;
  /** What became of the memories about users (absent when interrupted before them). */
  memories: Record<MemoryOutcome["status"], number>;
  /** Sessions or memories not copied; `sessionId` is absent for a memory. */
  problems: { sessionId?: string; userId?: string; message: string }[];
  interrupted: boolean;
  elapsedMs: number;
  /** Absent when interrupted or not asked for. */
  verification?: {
    sessions: number;
    sessionsOk: number;
    sourceMessages: number;
    targetMessages: number;
    /** Source memories, and those the target holds identically (same user, text, times, history). */
    memories: number;
    memoriesOk: number;
    /** Session ids, and `memory <userId>/<id>` for memories, that differ. */
    mismatched: string[];
  };
}

async function listSessions(store: FullStore, options: MigrateOptions): Promise<Session[]> {
  const all: Session[] = [];
  if (options.userId === undefined) {
    for await (const session of iterateAllSessions(store, { pageSize: options.pageSize })) all.push(session);
    return all;
  }
  let cursor: string | null = null;
  do {
    const page = await store.listSessions(options.userId, { limit: options.pageSize ?? 500, cursor });
    all.push(...page.sessions);
    cursor = page.nextCursor;
  } while (cursor);
  return all;
}

/** The users whose memories a migration copies. */
function owners(store: FullStore, userId: string | undefined): AsyncIterable<string> | string[] {
  return userId === undefined ? memoryOwners(store) : [userId];
}

async function verify(
  source: FullStore,
  target: FullStore,
  sessions: Session[],
  concurrency: number,
  userId: string | undefined,
) {
  const result = {
    sessions: sessions.length,
    sessionsOk: 0,
    sourceMessages: 0,
    targetMessages: 0,
    memories: 0,
    memoriesOk: 0,
    mismatched: [] as string[],
  };
  await forEachConcurrent(sessions, concurrency, async ({ id }) => {
    const [exists, from, to] = await Promise.all([
      target.getSession(id),
      source.countMessages(id),
      target.countMessages(id),
    ]);
    result.sourceMessages += from;
    result.targetMessages += to;
    if (exists && from === to) result.sessionsOk++;
    else result.mismatched.push(id);
  });
  await forEachConcurrent(owners(source, userId), concurrency, async (owner) => {
    for await (const memory of userMemories(source, owner)) {
      result.memories++;
      const copy = await target.getUserMemory(owner, memory.id);
      if (copy && sameData(storedMemory(copy), memory)) result.memoriesOk++;
      else result.mismatched.push(`memory ${owner}/${memory.id}`);
    }
  });
  return result;
}

/** Copies sessions from `source` to `target`; see the file comment for how re-runs behave. */
export async function migrateStores(
  anySource: SessionStore,
  anyTarget: SessionStore,
  options: MigrateOptions = {},
): Promise<MigrateReport> {
  const source = completeStore(anySource);
  const target = completeStore(anyTarget);
  const started = Date.now();
  const concurrency = options.concurrency ?? 16;
  const sessions = await listSessions(source, options);
  options.onStart?.(sessions.length);
  const report: MigrateReport = {
    total: sessions.length,
    counts: { created: 0, appended: 0, updated: 0, unchanged: 0, diverged: 0 },
    messagesCopied: 0,
    messagesSeen: 0,
    memories: { created: 0, unchanged: 0, diverged: 0 },
    problems: [],
    interrupted: false,
    elapsedMs: 0,
  };
  let done = 0;
  await forEachConcurrent(
    sessions,
    concurrency,
    async (session) => {
      const { id } = session;
      const bundle = await readSessionBundle(source, session);
      // Deleted (or expired) since it was listed: nothing to copy.
      if (bundle) {
        const outcome = await importSessionBundle(target, bundle);
        report.counts[outcome.status]++;
        report.messagesCopied += outcome.messagesAdded;
        report.messagesSeen += bundle.messages.length;
        if (outcome.status === "diverged")
          report.problems.push({ sessionId: id, message: `session ${id} not copied: ${outcome.reason}` });
      }
      done++;
      options.onProgress?.({ sessions: done, messages: report.messagesSeen });
    },
    options.signal,
  );
  report.interrupted = done < sessions.length;
  if (!report.interrupted) {
    let ownersDone = 0;
    let ownersSeen = 0;
    await forEachConcurrent(
      owners(source, options.userId),
      concurrency,
      async (userId) => {
        ownersSeen++;
        for await (const memory of userMemories(source, userId)) {
          const outcome = await importUserMemory(target, memory);
          report.memories[outcome.status]++;
          if (outcome.status === "diverged") report.problems.push({ userId, message: `${outcome.reason}: not copied` });
        }
        ownersDone++;
      },
      options.signal,
    );
    report.interrupted = ownersDone < ownersSeen || options.signal?.aborted === true;
  }
  report.elapsedMs = Date.now() - started;
  if (!report.interrupted && options.verify !== false)
    report.verification = await verify(source, target, sessions, concurrency, options.userId);
  return report;
}
