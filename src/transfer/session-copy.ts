/**
 * Moving whole sessions between a store and a {@link SessionBundle}: what export, import and
 * migrate share. The contract numbers messages itself (seq from 1) and stamps them with the time
 * of the append, so originals are kept where the contract leaves room, and mapped back on read:
 * - a session whose first seq is N > 1 gets `metadata.importedSeqOffset = N - 1`, and its summary
 *   ranges are shifted by the same offset;
 * - each message keeps its original time in `metadata.importedCreatedAt`.
 */
import { setImmediate as nextTask } from "node:timers/promises";
import { appendMessagesOf, saveSummaryOf } from "../core/incarnation.js";
import { CREATED_AT_KEY } from "../core/messages.js";
import { completeStore } from "../core/store/complete.js";
import type { Branch, Message, MessageInput, Session, FullStore, SessionStore } from "../core/types.js";
import { sameData, sortedData } from "./canonical.js";
import { type ExportedSummary, exportedMessage, type SessionBundle } from "./jsonl-format.js";

/** Session metadata key holding the difference between original and stored seqs. */
export const SEQ_OFFSET_KEY = "importedSeqOffset";
export { CREATED_AT_KEY };

/** Messages per append: large enough to be fast, small enough for any backend's statement limits. */
const APPEND_BATCH = 250;
/** Messages per read. */
const READ_PAGE = 1000;

/** What importing one session did. */
export type ImportOutcome =
  | { status: "created" | "appended" | "updated" | "unchanged"; messagesAdded: number }
  | { status: "diverged"; messagesAdded: 0; reason: string };

/** The offset between a stored session's seqs and its original ones. */
export function seqOffset(session: Session): number {
  const offset = session.metadata?.[SEQ_OFFSET_KEY];
  return typeof offset === "number" && Number.isSafeInteger(offset) ? offset : 0;
}

/** A copy of `record` without `key`. */
export function withoutKey(record: Record<string, unknown> | undefined, key: string): Record<string, unknown> {
  const { [key]: _dropped, ...rest } = record ?? {};
  return rest;
}

/** A stored message in original numbering and time. */
export function originalMessage(message: Message, offset: number): Message {
  const createdAt = message.metadata?.[CREATED_AT_KEY];
  const metadata = withoutKey(message.metadata, CREATED_AT_KEY);
  return exportedMessage({
    ...message,
    seq: message.seq + offset,
    createdAt: typeof createdAt === "number" ? createdAt : message.createdAt,
    metadata: Object.keys(metadata).length > 0 ? metadata : undefined,
  });
}

/** Reads all messages after `afterSeq`, page by page. */
export { READ_PAGE };
async function readMessages(store: FullStore, id: string, afterSeq = 0): Promise<Message[]> {
  const all: Message[] = [];
  for (;;) {
    const page = await store.getMessages(id, { afterSeq, limit: READ_PAGE });
    all.push(...page);
    if (page.length < READ_PAGE) return all;
    afterSeq = page[page.length - 1].seq;
  }
}

/**
 * Reads a whole session in original numbering; null when it does not exist. Pass the session record
 * when a listing already returned it, to save a round trip.
 */
export async function readSessionBundle(
  anyStore: SessionStore,
  session: string | Session,
): Promise<SessionBundle | null> {
  const store = completeStore(anyStore);
  const stored = typeof session === "string" ? await store.getSession(session) : session;
  if (!stored) return null;
  const offset = seqOffset(stored);
  const [messages, summaries, state, branches] = await Promise.all([
    readMessages(store, stored.id),
    store.listSummaries(stored.id),
    store.getState(stored.id),
    store.listBranches(stored.id),
  ]);
  return {
    session: { ...stored, metadata: withoutKey(stored.metadata, SEQ_OFFSET_KEY) },
    messages: messages.map((m) => originalMessage(m, offset)),
    summaries: summaries.map(({ id: _id, ...s }) => ({
      ...s,
      fromSeq: s.fromSeq + offset,
      toSeq: s.toSeq + offset,
    })),
    state: state.version > 0 ? state.data : null,
    branches: branches.map((b) => shiftBranch(b, offset)),
  };
}

/** A branch with its split point and messages renumbered by `offset`. */
export function shiftBranch(branch: Branch, offset: number): Branch {
  return {
    ...branch,
    atSeq: branch.atSeq + offset,
    messages: branch.messages.map((m) => ({ ...m, seq: m.seq + offset })),
  };
}

function storedInput(message: Message): MessageInput {
  const { seq: _seq, createdAt, metadata, ...input } = message;
  return { ...input, metadata: { ...metadata, [CREATED_AT_KEY]: createdAt } };
}

const summaryKey = (s: ExportedSummary) => JSON.stringify(sortedData({ ...s, metadata: s.metadata ?? {} }));

/**
 * Appends `messages` to `target` in batches, each only into the session copied to: one deleted and
 * created again under its id meanwhile refuses the batch (`session_not_found`) instead of taking the
 * rest of the copy.
 */
async function appendAll(store: FullStore, target: Session, messages: Message[]): Promise<void> {
  for (let i = 0; i < messages.length; i += APPEND_BATCH) {
    // The event loop runs between batches: with a synchronous store (SQLite) every await here settles
    // at once, and a 12,000-message session went in holding the loop 306 ms (an import inside a server).
    if (i > 0) await nextTask();
    // No maxMessages: an import keeps exactly what the source kept.
    await appendMessagesOf(store, target, messages.slice(i, i + APPEND_BATCH).map(storedInput));
  }
}

/**
 * Writes a session into `store`. A missing session is created whole. An existing one is compared:
 * identical → nothing written; the stored messages a prefix of the bundle's (an interrupted run)
 * → the missing tail, summaries and state are added; anything else → `diverged`, nothing written.
 */
export async function importSessionBundle(anyStore: SessionStore, bundle: SessionBundle): Promise<ImportOutcome> {
  const store = completeStore(anyStore);
  const { session, messages } = bundle;
  const offset = (messages[0]?.seq ?? 1) - 1;
  let target = await store.getSession(session.id);
  let status: ImportOutcome["status"] = "unchanged";
  let tail = messages;
  if (!target) {
    const metadata = offset > 0 ? { ...session.metadata, [SEQ_OFFSET_KEY]: offset } : session.metadata;
    target = await store.createSession({
      id: session.id,
      userId: session.userId,
      metadata,
      createdAt: session.createdAt,
      lastActivityAt: session.lastActivityAt,
    });
    status = "created";
  } else {
    if (target.userId !== session.userId) {
      return {
        status: "diverged",
        messagesAdded: 0,
        reason: `it belongs to ${target.userId} in the target, ${session.userId} in the source`,
      };
    }
    const [last] = await store.getMessages(target.id, { last: 1 });
    if (last) {
      const original = originalMessage(last, seqOffset(target));
      const index = original.seq - (messages[0]?.seq ?? 1);
      if (index >= messages.length) {
        const lastSeq = messages.at(-1)?.seq ?? 0;
        return {
          status: "diverged",
          messagesAdded: 0,
          reason: `the target holds messages up to seq ${original.seq}, the source only to ${lastSeq} (continued since?)`,
        };
      }
      if (index < 0 || !sameData(original, exportedMessage(messages[index]))) {
        return {
          status: "diverged",
          messagesAdded: 0,
          reason: `its message ${original.seq} differs from the source's`,
        };
      }
      tail = messages.slice(index + 1);
    } else if (seqOffset(target) !== offset) {
      // An empty session (created, then interrupted) can still take the offset it needs.
      target = await store.updateSessionMetadata(target.id, { ...target.metadata, [SEQ_OFFSET_KEY]: offset });
    }
    if (tail.length > 0) status = "appended";
  }
  const targetOffset = seqOffset(target);
  // A session just created holds nothing yet: no need to read its state and summaries back.
  const fresh = status === "created";
  const state = fresh ? { version: 0, data: {} } : await store.getState(target.id);
  if (bundle.state && state.version > 0 && !sameData(state.data, bundle.state)) {
    return { status: "diverged", messagesAdded: 0, reason: "its state differs from the source's" };
  }
  await appendAll(store, target, tail);

  const stored = new Set(
    (fresh ? [] : await store.listSummaries(target.id)).map(({ id: _id, ...s }) =>
      summaryKey({ ...s, fromSeq: s.fromSeq + targetOffset, toSeq: s.toSeq + targetOffset }),
    ),
  );
  for (const summary of bundle.summaries) {
    if (stored.has(summaryKey(summary))) continue;
    // Only into the session copied to: one deleted and created again meanwhile refuses it.
    await saveSummaryOf(store, target, {
      ...summary,
      fromSeq: summary.fromSeq - targetOffset,
      toSeq: summary.toSeq - targetOffset,
    });
    if (status === "unchanged") status = "updated";
  }
  const storedBranches = new Set((fresh ? [] : await store.listBranches(target.id)).map((b) => b.id));
  for (const branch of bundle.branches ?? []) {
    if (storedBranches.has(branch.id)) continue;
    await store.saveBranch(target.id, shiftBranch(branch, -targetOffset));
    if (status === "unchanged") status = "updated";
  }
  if (bundle.state && state.version === 0) {
    await store.setState(target.id, bundle.state, 0);
    if (status === "unchanged") status = "updated";
  }
  const wantedMetadata = targetOffset > 0 ? { ...session.metadata, [SEQ_OFFSET_KEY]: targetOffset } : session.metadata;
  if (status !== "created" && !sameData(target.metadata, wantedMetadata)) {
    await store.updateSessionMetadata(target.id, wantedMetadata);
    if (status === "unchanged") status = "updated";
  }
  if (status !== "unchanged" || target.lastActivityAt !== session.lastActivityAt) {
    // Appends moved the activity time to now; the source's is the truth.
    await store.touchSession(target.id, session.lastActivityAt);
    if (status === "unchanged") status = "updated";
  }
  return { status, messagesAdded: tail.length };
}

/**
 * Runs `fn` over `items` with at most `concurrency` calls in flight. Stops taking items on the first
 * failure or when `signal` aborts, waits for the calls in flight, then rethrows the failure.
 */
export async function forEachConcurrent<T>(
  items: AsyncIterable<T> | Iterable<T>,
  concurrency: number,
  fn: (item: T) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  const running = new Set<Promise<void>>();
  let failed = false;
  let failure: unknown;
  for await (const item of items) {
    if (signal?.aborted || failed) break;
    const call: Promise<void> = fn(item)
      .catch((error) => {
        if (!failed) [failed, failure] = [true, error];
      })
      .finally(() => running.delete(call));
    running.add(call);
    if (running.size >= concurrency) await Promise.race(running);
  }
  await Promise.all(running);
  if (failed) throw failure;
}
