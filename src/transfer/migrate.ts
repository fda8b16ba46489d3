/**
 * Migration: copies every session (messages, summaries, state, times) between any two stores, a few
 * sessions at a time. A session already in the target is skipped or completed, so an interrupted run
 * is finished by running it again; the run ends by counting what the target holds against the source.
 */
import { iterateAllSessions } from "../core/enumerate.js";
import { completeStore } from "../core/store/complete.js";
import type { Session, FullStore, SessionStore } from "../core/types.js";
import {
  forEachConcurrent,
  type ImportOutcome,
  importSessionBundle,
  readSessionBundle,
} from "./session-copy.js";

/** Options of {@link migrateStores}. */
export interface MigrateOptions {
  /** Only this owner's sessions. @default every session */
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
  problems: { sessionId: string; message: string }[];
  interrupted: boolean;
  elapsedMs: number;
  /** Absent when interrupted or not asked for. */
  verification?: {
    sessions: number;
    sessionsOk: number;
    sourceMessages: number;
    targetMessages: number;
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

async function verify(source: FullStore, target: FullStore, sessions: Session[], concurrency: number) {
  const result = {
    sessions: sessions.length,
    sessionsOk: 0,
    sourceMessages: 0,
    targetMessages: 0,
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
  report.elapsedMs = Date.now() - started;
  if (!report.interrupted && options.verify !== false)
    report.verification = await verify(source, target, sessions, concurrency);
  return report;
}
