/**
 * Export: the selected sessions of a store, then the selected users' memories, as lines of the
 * threadkeep JSONL format (docs/cli.md, "Export format"), header first. A session's messages are read
 * and written a page at a time, so a long history is never held whole in memory.
 */
import { iterateAllSessions } from "../core/enumerate.js";
import { SessionNotFoundError } from "../core/errors.js";
import { parseSessionId } from "../core/ids.js";
import { completeStore } from "../core/store/complete.js";
import type { FullStore, Message, Session, SessionStore } from "../core/types.js";
import { bundleLines, exportedMessage, headerLine, memoryLine, type SessionBundle } from "./jsonl-format.js";
import { memoryOwners, userMemories } from "./user-memory-copy.js";
import { originalMessage, READ_PAGE, seqOffset, shiftBranch, SEQ_OFFSET_KEY, withoutKey } from "./session-copy.js";

/**
 * What to export: one session (without memories), one user's sessions and memories, or every
 * session and every user's memories.
 */
export type ExportSelection = { sessionId: string } | { userId: string } | { all: true };

/** Counts of an export. */
export interface ExportReport {
  sessions: number;
  messages: number;
  memories: number;
}

/** Options of {@link exportSessions}. */
export interface ExportOptions {
  /** Stops between lines; the lines written so far stay a valid prefix of the file. */
  signal?: AbortSignal;
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

/** A session with all but its messages past the first page: what is read ahead of writing. */
interface SessionHead {
  bundle: SessionBundle;
  offset: number;
  /** The first page of messages, as stored. */
  firstPage: Message[];
}

async function readHead(store: FullStore, id: string): Promise<SessionHead | null> {
  const stored = await store.getSession(id);
  if (!stored) return null;
  const offset = seqOffset(stored);
  const [firstPage, summaries, state, branches] = await Promise.all([
    store.getMessages(id, { afterSeq: 0, limit: READ_PAGE }),
    store.listSummaries(id),
    store.getState(id),
    store.listBranches(id),
  ]);
  const bundle: SessionBundle = {
    session: { ...stored, metadata: withoutKey(stored.metadata, SEQ_OFFSET_KEY) },
    messages: [],
    summaries: summaries.map(({ id: _id, ...s }) => ({ ...s, fromSeq: s.fromSeq + offset, toSeq: s.toSeq + offset })),
    state: state.version > 0 ? state.data : null,
    branches: branches.map((b) => shiftBranch(b, offset)),
  };
  return { bundle, offset, firstPage };
}

/** Writes the selected sessions, then the selected memories, as export lines (header first). */
export async function exportSessions(
  anyStore: SessionStore,
  selection: ExportSelection,
  writeLine: (line: string) => Promise<void> | void,
  options: ExportOptions = {},
): Promise<ExportReport> {
  const store = completeStore(anyStore);
  const report: ExportReport = { sessions: 0, messages: 0, memories: 0 };
  const write = async (line: string) => {
    options.signal?.throwIfAborted();
    await writeLine(line);
  };
  await write(headerLine());
  const ahead: Promise<SessionHead | null>[] = [];
  const drain = async () => {
    const head = await ahead.shift();
    // A session deleted between listing and reading is simply not exported.
    if (!head) return;
    const [sessionLine, ...rest] = bundleLines(head.bundle);
    await write(sessionLine);
    let page = head.firstPage;
    const id = head.bundle.session.id;
    for (;;) {
      for (const message of page)
        await write(
          JSON.stringify({
            type: "message",
            sessionId: id,
            message: exportedMessage(originalMessage(message, head.offset)),
          }),
        );
      report.messages += page.length;
      if (page.length < READ_PAGE) break;
      page = await store.getMessages(id, { afterSeq: page[page.length - 1].seq, limit: READ_PAGE });
    }
    for (const line of rest) await write(line);
    report.sessions++;
  };
  for await (const session of selectedSessions(store, selection)) {
    const read = readHead(store, session.id);
    read.catch(() => {});
    ahead.push(read);
    if (ahead.length >= 8) await drain();
  }
  while (ahead.length > 0) await drain();

  if ("sessionId" in selection) return report;
  const owners = "userId" in selection ? [selection.userId] : memoryOwners(store);
  for await (const userId of owners) {
    for await (const memory of userMemories(store, userId)) {
      await write(memoryLine(memory));
      report.memories++;
    }
  }
  return report;
}
