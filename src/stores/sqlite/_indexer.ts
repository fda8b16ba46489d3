/** Queued messages added to the full-text index per step of the background indexer (a few ms each). */
const INDEX_CHUNK_ROWS = 500;

/** The background full-text indexer of a SQLite store: new messages reach the index in batches. */
export interface SqliteIndexer {
  /** Indexes the queued text `delayMs` from now, unless a run is already due. */
  schedule(): void;
  /** Stops a due run (the store is closing). */
  cancel(): void;
}

/**
 * `indexPending(rows)` indexes up to `rows` queued messages and says whether more wait; `isClosed`
 * stops the indexer once the store closes.
 */
export function createSqliteIndexer(
  indexPending: (rows: number) => boolean,
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
      more = indexPending(INDEX_CHUNK_ROWS);
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
