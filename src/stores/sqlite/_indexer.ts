import type { SqliteStatements } from "./_statements.js";

/** Queued messages added to the full-text index per step of the background indexer (a few ms each). */
const INDEX_CHUNK_ROWS = 500;

/** The background full-text indexer of a SQLite store: new messages reach the index in batches. */
export interface SqliteIndexer {
  /** Indexes the queued text `delayMs` from now, unless a run is already due. */
  schedule(): void;
  /** Stops a due run (the store is closing). */
  cancel(): void;
}

/** How long the indexer waits before trying again when another connection holds the write lock. */
const BUSY_RETRY_MS = 50;

/**
 * `indexPending(rows)` indexes up to `rows` queued messages and says whether more wait, or `"busy"`
 * when another connection holds the write lock (it must not wait for it: see below); `isClosed` stops
 * the indexer once the store closes.
 */
export function createSqliteIndexer(
  indexPending: (rows: number) => boolean | "busy",
  isClosed: () => boolean,
  delayMs: number,
): SqliteIndexer {
  let indexTimer: NodeJS.Timeout | undefined;

  /**
   * Indexes the queued text a chunk at a time, the event loop free between chunks: a second of busy
   * appends indexed in one go held the loop for ~70 ms.
   */
  const indexQueued = () => {
    indexTimer = undefined;
    if (isClosed()) return;
    let more = false;
    try {
      const done = indexPending(INDEX_CHUNK_ROWS);
      if (done === "busy") {
        // Another connection (the vector index builder's worker, another process) is writing. Waiting
        // in SQLite's busy handler would hold this thread's event loop for the rest of that write
        // (~100 ms while a 12,000-vector index is written, more with a core busy): try again later.
        indexTimer = setTimeout(indexQueued, BUSY_RETRY_MS);
        indexTimer.unref();
        return;
      }
      more = done;
    } catch (error) {
      // Nothing is lost: the text stays queued and the next append or full-text search retries.
      console.warn(`[threadkeep] sqlite: full-text indexing failed, will retry: ${(error as Error).message}`);
    }
    if (more && !isClosed()) {
      indexTimer = setTimeout(indexQueued, 0);
      indexTimer.unref();
    }
  };
  const scheduleIndexing = () => {
    if (indexTimer) return;
    indexTimer = setTimeout(indexQueued, delayMs);
    indexTimer.unref();
  };

  return { schedule: scheduleIndexing, cancel: () => clearTimeout(indexTimer) };
}

/** Whose waiting messages a step of the full-text indexer takes (see {@link indexPendingStep}). */
export interface IndexScope {
  userId: string;
  /** Only this session (of `userId`). */
  sessionId?: string;
}

/**
 * One step of the indexer, inside the caller's write transaction: adds at most `limit` waiting messages
 * to the full-text index, a session at a time from its oldest (any session's, or only those of
 * `scope`), and takes a session out of the queue once nothing of it waits. @returns true when messages
 * (of `scope`) still wait.
 *
 * Set-based: the queue is read once with each session's last seq, and the sessions the step takes
 * whole are indexed, moved on and dequeued by one statement each. With four statements per session, a
 * busy server's indexing (its sessions gain a message or two between runs) cost ~27 µs of CPU a
 * message, ~16 µs this way; a backlog (many messages a session) costs the same either way, ~6.5 µs a
 * message (docs/benchmarks.md, "What the gaps are").
 */
export function indexPendingStep(st: SqliteStatements, limit: number, scope?: IndexScope): boolean {
  const pending = (n: number) =>
    !scope
      ? st.pendingSessions.all(n)
      : scope.sessionId === undefined
        ? st.pendingSessionsOf.all(scope.userId, n)
        : st.pendingSession.all(scope.sessionId, scope.userId, n);
  const cap = Math.max(1, limit);
  let budget = cap;
  const sessions = pending(cap);
  /** `[key, to]`: index the session's messages above its fts_seq up to `to`, and record `to`. */
  const toIndex: [number, number][] = [];
  const toDequeue: number[] = [];
  let left = false;
  for (const { key, id, fts_seq: from, last_seq: last } of sessions) {
    if (budget <= 0) {
      left = true;
      break;
    }
    if (last === null || last <= from) {
      toDequeue.push(key);
      continue;
    }
    // Seqs are distinct integers, so no more than `last - from` messages wait.
    if (last - from <= budget) {
      toIndex.push([key, last]);
      toDequeue.push(key);
      budget -= last - from;
      continue;
    }
    // Perhaps more than the budget waits (fewer where a cap or a quarantine left gaps): its next `budget`.
    const [end, count] = st.pendingEnd.get(id, from, budget)!;
    if (end === null) {
      toDequeue.push(key);
      continue;
    }
    toIndex.push([key, end]);
    // Fewer than the budget allowed: nothing of this session is left above `end`.
    if (count < budget) toDequeue.push(key);
    else left = true;
    budget -= count;
  }
  if (toIndex.length > 0) {
    const pairs = JSON.stringify(toIndex);
    st.indexSessions.run(pairs);
    st.indexedToEach.run(pairs);
  }
  if (toDequeue.length > 0) st.dequeueEach.run(JSON.stringify(toDequeue));
  if (left) return true;
  // Every queued session (of `scope`) was read, and each is done.
  if (sessions.length < cap) return false;
  return pending(1).length > 0;
}
