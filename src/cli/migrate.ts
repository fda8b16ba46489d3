/**
 * `threadkeep migrate --from URL --to URL`: opens both stores and runs {@link migrateStores} with a
 * progress bar; Ctrl-C stops after the sessions in flight, so running it again finishes the copy.
 */
import type { Command } from "commander";
import { describeCommand } from "./_commands.js";
import { ThreadkeepError } from "../core/errors.js";
import { parsePositiveInt } from "../core/policies.js";
import type { FullStore } from "../core/types.js";
import { createStore } from "../stores/url.js";
import { type MigrateReport, migrateStores } from "../transfer/migrate.js";
import { createProgress, formatDuration } from "./_progress.js";
import { resolveConfig } from "./options.js";

function sameStore(from: string, to: string): boolean {
  const norm = (u: string) => u.trim().replace(/\/+$/, "");
  return norm(from) === norm(to) && !norm(from).startsWith("memory:");
}

/** Adds `threadkeep migrate`. */
export function register(program: Command): void {
  program
    .command("migrate")
    .description(describeCommand("migrate"))
    .requiredOption("--from <url>", "source store URL (memory:, file:<dir>, sqlite:<path>, postgres://…, redis://…)")
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
      async (opts: { from: string; to: string; user?: string; concurrency: string; verify: boolean; ttl?: string }) => {
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
        let target: FullStore | undefined;
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
  const m = report.memories;
  process.stdout.write(`copied ${m.created} memories (${m.unchanged} already there)\n`);
  if (report.interrupted)
    throw new Error("interrupted: run the same command again to finish (nothing is copied twice)");
  const v = report.verification;
  if (v) {
    process.stdout.write(
      `verified: ${v.sessionsOk}/${v.sessions} sessions, ${v.targetMessages}/${v.sourceMessages} messages, ${v.memoriesOk}/${v.memories} memories in the target\n`,
    );
    if (v.mismatched.length > 0) {
      throw new Error(
        `${v.mismatched.length} session(s) or memories differ between source and target, e.g. ${v.mismatched.slice(0, 3).join(", ")}`,
      );
    }
  }
  if (report.problems.length > 0)
    throw new Error(`${report.problems.length} session(s) or memories could not be copied (listed above)`);
}
