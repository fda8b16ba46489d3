/**
 * Import: lines of the threadkeep JSONL format into a store. Idempotent: a session already in the
 * store is skipped when identical, completed when the store holds a prefix of it, and reported when
 * it diverges; a memory already there is skipped when identical and reported when not.
 */
import { completeStore } from "../core/store/complete.js";
import type { SessionStore } from "../core/types.js";
import { type ExportItem, type FormatProblem, readExport } from "./jsonl-format.js";
import { importUserMemory, type MemoryOutcome } from "./user-memory-copy.js";
import { forEachConcurrent, type ImportOutcome, importSessionBundle } from "./session-copy.js";

/** What an import did. */
export interface ImportReport {
  counts: Record<ImportOutcome["status"], number>;
  messagesAdded: number;
  /** What became of the memories about users. */
  memories: Record<MemoryOutcome["status"], number>;
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
  anyStore: SessionStore,
  lines: () => AsyncIterable<string> | Iterable<string>,
  options: ImportOptions = {},
): Promise<ImportReport> {
  const store = completeStore(anyStore);
  const report: ImportReport = {
    counts: { created: 0, appended: 0, updated: 0, unchanged: 0, diverged: 0 },
    messagesAdded: 0,
    memories: { created: 0, unchanged: 0, diverged: 0 },
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
  async function* items() {
    for await (const item of readExport(lines())) {
      if (item.kind === "problem") problem(item.problem);
      else yield item;
    }
  }
  await forEachConcurrent(items(), options.concurrency ?? 8, async (item: Exclude<ExportItem, { kind: "problem" }>) => {
    if (item.kind === "memory") {
      const outcome = await importUserMemory(store, item.memory);
      report.memories[outcome.status]++;
      if (outcome.status === "diverged") problem({ line: item.line, message: `${outcome.reason}: not imported` });
      return;
    }
    const { bundle, line } = item;
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
