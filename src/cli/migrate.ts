/**
 * `threadkeep migrate --from URL --to URL`: copies every session (messages, summaries, state, times)
 * between any two stores, a few sessions at a time. A session already in the target is skipped or
 * completed, so an interrupted run is finished by running it again; the run ends by counting what
 * the target holds against the source.
 */
import type { Command } from "commander";
import { describeCommand } from "./_commands.js";
import { iterateAllSessions } from "../core/enumerate.js";
import { ThreadkeepError } from "../core/errors.js";
import { parsePositiveInt } from "../core/policies.js";
import type { Session, SessionStore } from "../core/types.js";
import { createStore } from "../stores/url.js";
import { createProgress, formatDuration, type ProgressCounts } from "./_progress.js";
import {
  forEachConcurrent,
  type ImportOutcome,
  importSessionBundle,
  readSessionBundle,
} from "./_session-copy.js";
import { resolveConfig } from "./options.js";

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
  /** Called after each session. */
  onProgress?: (done: ProgressCounts) => void;
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

async function listSessions(store: SessionStore, options: MigrateOptions): Promise<Session[]> {
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

async function verify(source: SessionStore, target: SessionStore, sessions: Session[], concurrency: number) {
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
  source: SessionStore,
  target: SessionStore,
  options: MigrateOptions = {},
): Promise<MigrateReport> {
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

function sameStore(from: string, to: string): boolean {
  const norm = (u: string) => u.trim().replace(/\/+$/, "");
  return norm(from) === norm(to) && !norm(from).startsWith("memory:");
}

/** Adds `threadkeep migrate`. */
export function register(program: Command): void {
  program
    .command("migrate")
    .description(describeCommand("migrate"))
    .requiredOption(
      "--from <url>",
      "source store URL (memory:, file:<dir>, sqlite:<path>, postgres://…, redis://…)",
    )
    .requiredOption("--to <url>", "target store URL")
    .option("--user <id>", "only this owner's sessions")
    .option("--concurrency <n>", "sessions copied at once", "16")
    .option("--no-verify", "skip the final count of the target against the source")
    .option("--ttl <duration>", "inactivity expiry the stores apply (env THREADKEEP_TTL; default 7d)")
    .addHelpText(
      "after",
      `
Messages are appended in batches; sessions already in the target are skipped when identical and
completed when the target holds their beginning, so an interrupted run (Ctrl-C) is finished by running
the same command again, without duplicates. Progress goes to standard error: a bar on a terminal,
a line every 2 seconds otherwise. Exit code 1 when a session could not be copied or the counts differ.

Example:
  threadkeep migrate --from sqlite:./data/threadkeep.db --to postgres://threadkeep@db.internal/threadkeep`,
    )
    .action(
      async (opts: {
        from: string;
        to: string;
        user?: string;
        concurrency: string;
        verify: boolean;
        ttl?: string;
      }) => {
        if (sameStore(opts.from, opts.to))
          throw new ThreadkeepError("invalid_request", "--from and --to name the same store");
        const concurrency = parsePositiveInt(opts.concurrency, "--concurrency");
        const { ttlMs } = resolveConfig({ ttl: opts.ttl, store: opts.to });
        const source = await createStore(opts.from, { ttlMs });
        const stop = new AbortController();
        const onSigint = () => {
          process.stderr.write("\nstopping after the sessions in flight (Ctrl-C again to quit at once)…\n");
          stop.abort();
          process.off("SIGINT", onSigint);
        };
        let target: SessionStore | undefined;
        try {
          target = await createStore(opts.to, { ttlMs });
          process.on("SIGINT", onSigint);
          let progress: ReturnType<typeof createProgress> | undefined;
          const report = await migrateStores(source, target, {
            userId: opts.user,
            concurrency,
            verify: opts.verify,
            signal: stop.signal,
            onStart: (total) => {
              progress = createProgress({ output: process.stderr, total, label: "migrate" });
            },
            onProgress: (done) => progress?.update(done),
          });
          progress?.finish();
          printReport(report);
        } finally {
          process.off("SIGINT", onSigint);
          await Promise.all([source.close(), target?.close()]);
        }
      },
    );
}

function printReport(report: MigrateReport): void {
  const { created, appended, updated, unchanged } = report.counts;
  const seconds = Math.max(report.elapsedMs, 1) / 1000;
  const processed = created + appended + updated + unchanged + report.counts.diverged;
  for (const problem of report.problems) process.stderr.write(`${problem.message}\n`);
  process.stdout.write(
    `copied ${created + appended + updated} sessions (${created} new, ${appended} completed, ${updated} updated; ${unchanged} already there), ` +
      `${report.messagesCopied} messages in ${formatDuration(report.elapsedMs)} ` +
      `(${Math.round(processed / seconds)} sessions/s, ${Math.round(report.messagesSeen / seconds)} messages/s)\n`,
  );
  if (report.interrupted)
    throw new Error("interrupted: run the same command again to finish (nothing is copied twice)");
  const v = report.verification;
  if (v) {
    process.stdout.write(
      `verified: ${v.sessionsOk}/${v.sessions} sessions, ${v.targetMessages}/${v.sourceMessages} messages in the target\n`,
    );
    if (v.mismatched.length > 0) {
      throw new Error(
        `${v.mismatched.length} session(s) differ between source and target, e.g. ${v.mismatched.slice(0, 3).join(", ")}`,
      );
    }
  }
  if (report.problems.length > 0)
    throw new Error(`${report.problems.length} session(s) could not be copied (listed above)`);
}
