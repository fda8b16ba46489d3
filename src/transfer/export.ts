/**
 * Export: the selected sessions of a store as lines of the threadkeep JSONL format (docs/cli.md,
 * "Export format"), header first.
 */
import { iterateAllSessions } from "../core/enumerate.js";
import { SessionNotFoundError } from "../core/errors.js";
import { parseSessionId } from "../core/ids.js";
import { completeStore } from "../core/store/complete.js";
import type { Session, FullStore, SessionStore } from "../core/types.js";
import { bundleLines, headerLine, type SessionBundle } from "./jsonl-format.js";
import { readSessionBundle } from "./session-copy.js";

/** Which sessions to export. */
export type ExportSelection = { sessionId: string } | { userId: string } | { all: true };

/** Counts of an export. */
export interface ExportReport {
  sessions: number;
  messages: number;
}

async function* selectedSessions(store: FullStore, selection: ExportSelection): AsyncGenerator<Session> {
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
  anyStore: SessionStore,
  selection: ExportSelection,
  writeLine: (line: string) => Promise<void> | void,
): Promise<ExportReport> {
  const store = completeStore(anyStore);
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
