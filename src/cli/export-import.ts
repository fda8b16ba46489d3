/**
 * `threadkeep export` and `threadkeep import`: sessions as JSONL (docs/cli.md, "Export format"),
 * over the store named by `--store`; the work is done by src/transfer.
 */
import { once } from "node:events";
import { createReadStream, createWriteStream, existsSync } from "node:fs";
import { createInterface } from "node:readline";
import type { Command } from "commander";
import { describeCommand } from "./_commands.js";
import { ThreadkeepError } from "../core/errors.js";
import { type ExportSelection, exportSessions } from "../transfer/export.js";
import { importSessions } from "../transfer/import.js";
import { type Output, write } from "./_format.js";
import { addStoreUrlOption, withStore } from "./_store.js";

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
    .action(async (opts: { session?: string; user?: string; all?: boolean; output?: string; store?: string }) => {
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
          `exported ${report.sessions} sessions, ${report.messages} messages, ${report.memories} memories${opts.output ? ` to ${opts.output}` : ""}\n`,
        );
      });
    });

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
          onProblem: (p) => process.stderr.write(`${file}:${p.line}${p.toLine ? `-${p.toLine}` : ""}: ${p.message}\n`),
        });
        const { created, appended, updated, unchanged } = report.counts;
        if (opts.strict && report.problems.length > 0) {
          throw new Error(`nothing imported: ${report.problems.length} bad line(s) (--strict)`);
        }
        process.stdout.write(
          `imported ${created + appended + updated} sessions (${created} new, ${appended} completed, ${updated} updated), ` +
            `${report.messagesAdded} messages; ${unchanged} already present; ` +
            `${report.memories.created} memories (${report.memories.unchanged} already present)\n`,
        );
        if (report.problems.length > 0) throw new Error(`${report.problems.length} problem(s), listed above`);
      });
    });
}
