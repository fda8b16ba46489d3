/**
 * `threadkeep export` and `threadkeep import`: sessions as JSONL (docs/cli.md, "Export format").
 * Import is idempotent: a session already in the store is skipped when identical, completed when
 * the store holds a prefix of it, and reported (exit 1) when it diverges.
 */
import { once } from "node:events";
import { createReadStream, createWriteStream, existsSync } from "node:fs";
import { createInterface } from "node:readline";
import type { Command } from "commander";
import { describeCommand } from "./_commands.js";
import { iterateAllSessions } from "../core/enumerate.js";
import { SessionNotFoundError, ThreadkeepError } from "../core/errors.js";
import { parseSessionId } from "../core/ids.js";
import type { Session, SessionStore } from "../core/types.js";
import { type Output, write } from "./_format.js";
import {
  bundleLines,
  type FormatProblem,
  headerLine,
  readExport,
  type SessionBundle,
} from "./_jsonl-format.js";
import {
  forEachConcurrent,
  type ImportOutcome,
  importSessionBundle,
  readSessionBundle,
} from "./_session-copy.js";
import { addStoreUrlOption, withStore } from "./_store.js";

/** Which sessions to export. */
export type ExportSelection = { sessionId: string } | { userId: string } | { all: true };

/** Counts of an export. */
export interface ExportReport {
  sessions: number;
  messages: number;
}

async function* selectedSessions(store: SessionStore, selection: ExportSelection): AsyncGenerator<Session> {
  if ("sessionId" in selection) {
    const session = await store.getSession(parseSessionId(selection.sessionId));
    if (!session) throw new SessionNotFoundError(selection.sessionId);
    yield session;
  } else if ("userId" in selection) {
    let cursor: string | null = null;
    do {
      const page = await store.listSessions(selection.userId, { limit: 200, cursor });
      yield* page.sessions;
      cursor = page.nextCursor;
    } while (cursor);
  } else {
    yield* iterateAllSessions(store);
  }
}

/** Writes the selected sessions as export lines (header first), reading a few sessions ahead. */
export async function exportSessions(
  store: SessionStore,
  selection: ExportSelection,
  writeLine: (line: string) => Promise<void> | void,
): Promise<ExportReport> {
  const report: ExportReport = { sessions: 0, messages: 0 };
  await writeLine(headerLine());
  const ahead: Promise<SessionBundle | null>[] = [];
  const drain = async () => {
    const bundle = await ahead.shift();
    // A session deleted between listing and reading is simply not exported.
    if (!bundle) return;
    for (const line of bundleLines(bundle)) await writeLine(line);
    report.sessions++;
    report.messages += bundle.messages.length;
  };
  for await (const session of selectedSessions(store, selection)) {
    const read = readSessionBundle(store, session.id);
    read.catch(() => {});
    ahead.push(read);
    if (ahead.length >= 8) await drain();
  }
  while (ahead.length > 0) await drain();
  return report;
}

/** What an import did. */
export interface ImportReport {
  counts: Record<ImportOutcome["status"], number>;
  messagesAdded: number;
  /** Bad lines, and sessions that could not be imported. */
  problems: FormatProblem[];
}

/** Options of {@link importSessions}. */
export interface ImportOptions {
  /** Check every line first and import nothing if any is bad. Needs `lines` to be re-readable. @default false */
  strict?: boolean;
  /** Sessions written at once. @default 8 */
  concurrency?: number;
  /** Called for each problem as it is found. */
  onProblem?: (problem: FormatProblem) => void;
}

/**
 * Imports export lines into `store`. `lines` is called once (twice with `strict`) for a fresh iterable.
 * Bad lines and diverged sessions are reported; every other session is imported.
 */
export async function importSessions(
  store: SessionStore,
  lines: () => AsyncIterable<string> | Iterable<string>,
  options: ImportOptions = {},
): Promise<ImportReport> {
  const report: ImportReport = {
    counts: { created: 0, appended: 0, updated: 0, unchanged: 0, diverged: 0 },
    messagesAdded: 0,
    problems: [],
  };
  const problem = (p: FormatProblem) => {
    report.problems.push(p);
    options.onProblem?.(p);
  };
  if (options.strict) {
    for await (const item of readExport(lines())) if (item.kind === "problem") problem(item.problem);
    if (report.problems.length > 0) return report;
  }
  async function* bundles() {
    for await (const item of readExport(lines())) {
      if (item.kind === "bundle") yield item;
      else problem(item.problem);
    }
  }
  await forEachConcurrent(bundles(), options.concurrency ?? 8, async ({ bundle, line }) => {
    const outcome = await importSessionBundle(store, bundle);
    report.counts[outcome.status]++;
    report.messagesAdded += outcome.messagesAdded;
    if (outcome.status === "diverged") {
      problem({
        line,
        sessionId: bundle.session.id,
        message: `session ${bundle.session.id} not imported: ${outcome.reason}`,
      });
    }
  });
  return report;
}

function selectionOf(opts: { session?: string; user?: string; all?: boolean }): ExportSelection {
  const given = [opts.session, opts.user, opts.all].filter((v) => v !== undefined && v !== false).length;
  if (given > 1) throw new ThreadkeepError("invalid_request", "Choose one of --session, --user and --all");
  if (opts.session) return { sessionId: opts.session };
  if (opts.user) return { userId: opts.user };
  return { all: true };
}

function fileLines(file: string): () => AsyncIterable<string> | Iterable<string> {
  if (file !== "-")
    return () => createInterface({ input: createReadStream(file), crlfDelay: Number.POSITIVE_INFINITY });
  // Standard input can be read only once; --strict reads twice, so keep it.
  let cached: Promise<string[]> | undefined;
  return () =>
    (async function* () {
      cached ??= (async () => {
        const all: string[] = [];
        for await (const line of createInterface({
          input: process.stdin,
          crlfDelay: Number.POSITIVE_INFINITY,
        }))
          all.push(line);
        return all;
      })();
      yield* await cached;
    })();
}

/** Adds `threadkeep export` and `threadkeep import`. */
export function register(program: Command): void {
  const exportCommand = program
    .command("export")
    .description(describeCommand("export"))
    .option("--session <id>", "export one session")
    .option("--user <id>", "export one owner's sessions")
    .option("--all", "export every session (the default)")
    .option("-o, --output <file>", "write to this file instead of standard output");
  addStoreUrlOption(exportCommand)
    .addHelpText(
      "after",
      "\nExamples:\n  threadkeep export --all -o backup.jsonl\n  threadkeep export --session 5f0c…  | jq .",
    )
    .action(
      async (opts: { session?: string; user?: string; all?: boolean; output?: string; store?: string }) => {
        const selection = selectionOf(opts);
        await withStore(opts, async (store) => {
          const out: Output = opts.output ? createWriteStream(opts.output) : process.stdout;
          let failure: Error | undefined;
          if (opts.output) {
            // An unwritable path fails here, as an error message, not as an unhandled stream error.
            await once(out, "open");
            out.on("error", (error: Error) => (failure = error));
          }
          const report = await exportSessions(store, selection, (line) => {
            if (failure) throw failure;
            return write(out, `${line}\n`);
          });
          if (opts.output)
            await new Promise<void>((resolve, reject) =>
              out.end((error?: Error | null) => (error ? reject(error) : resolve())),
            );
          process.stderr.write(
            `exported ${report.sessions} sessions, ${report.messages} messages${opts.output ? ` to ${opts.output}` : ""}\n`,
          );
        });
      },
    );

  const importCommand = program
    .command("import")
    .description(describeCommand("import"))
    .argument("<file>", "export file, or - for standard input")
    .option("--strict", "check the whole file first and import nothing if any line is bad");
  addStoreUrlOption(importCommand)
    .addHelpText(
      "after",
      "\nA bad line is reported with its line number and its session is skipped; the other sessions are\nimported and the exit code is 1. A session already in the store is skipped when identical,\ncompleted when the store holds the beginning of it, and reported when it differs.",
    )
    .action(async (file: string, opts: { strict?: boolean; store?: string }) => {
      if (file !== "-" && !existsSync(file))
        throw new ThreadkeepError("invalid_request", `Cannot import ${file}: no such file`);
      await withStore(opts, async (store) => {
        const report = await importSessions(store, fileLines(file), {
          strict: opts.strict,
          onProblem: (p) =>
            process.stderr.write(`${file}:${p.line}${p.toLine ? `-${p.toLine}` : ""}: ${p.message}\n`),
        });
        const { created, appended, updated, unchanged } = report.counts;
        if (opts.strict && report.problems.length > 0) {
          throw new Error(`nothing imported: ${report.problems.length} bad line(s) (--strict)`);
        }
        process.stdout.write(
          `imported ${created + appended + updated} sessions (${created} new, ${appended} completed, ${updated} updated), ` +
            `${report.messagesAdded} messages; ${unchanged} already present\n`,
        );
        if (report.problems.length > 0) throw new Error(`${report.problems.length} problem(s), listed above`);
      });
    });
}
