import type { SessionStore, Summary } from "../types.js";
import type { Summarizer } from "./summarize.js";

/** When and how much of a session is summarised (only with a summarizer). */
export interface CompactionOptions {
  /** Unsummarised messages older than the window that make the oldest of them a summary. @default 20 */
  threshold?: number;
  /** Most messages folded into one summary request. @default 100 */
  maxBatch?: number;
  /**
   * Summarise after `addMessages` returns instead of before (the summary request then holds up no
   * turn; errors are logged either way). @default false
   */
  background?: boolean;
}

/** What one compaction did. */
export interface CompactionResult {
  /** The summary written, if any. */
  summary?: Summary;
  /** Messages dropped by the cap because a summary covers them. */
  dropped: number;
  /** Why summarising failed, if it did (nothing was lost: the messages stay). */
  error?: unknown;
}

/** The settings a compaction runs with. */
export interface CompactionSettings {
  window: number;
  /** Messages kept per session; 0: no cap. */
  maxMessages: number;
  threshold: number;
  maxBatch: number;
}

/** The summary that covers the most recent messages (a rolling summary contains the ones before it). */
export function latestSummary(summaries: readonly Summary[]): Summary | undefined {
  let latest: Summary | undefined;
  for (const s of summaries)
    if (!latest || s.toSeq > latest.toSeq || (s.toSeq === latest.toSeq && s.id > latest.id)) latest = s;
  return latest;
}

/**
 * Summarises the oldest unsummarised messages outside the window when there are more than the
 * threshold (or the cap needs them gone), folding them into the latest summary; then applies the
 * message cap to messages a summary covers, never to others. A failed summary loses nothing: the
 * error is returned and the messages stay until a later compaction succeeds.
 */
export async function compactSession(
  store: SessionStore,
  sessionId: string,
  summarizer: Summarizer,
  settings: CompactionSettings,
): Promise<CompactionResult> {
  const [summaries, newest, oldest, count] = await Promise.all([
    store.listSummaries(sessionId),
    store.getMessages(sessionId, { last: 1 }),
    store.getMessages(sessionId, { limit: 1 }),
    store.countMessages(sessionId),
  ]);
  if (newest.length === 0) return { dropped: 0 };
  const lastSeq = newest[0].seq;
  const firstSeq = oldest[0].seq;
  const previous = latestSummary(summaries);
  let coveredTo = previous?.toSeq ?? 0;
  const overflow = settings.maxMessages > 0 ? Math.max(0, count - settings.maxMessages) : 0;
  // Summarise up to the window, or further when the cap must drop messages the window still holds.
  const end = Math.max(lastSeq - settings.window, firstSeq + overflow - 1);
  const start = Math.max(coveredTo, firstSeq - 1) + 1;
  const result: CompactionResult = { dropped: 0 };
  if (
    end - start + 1 > settings.threshold ||
    (overflow > 0 && coveredTo < firstSeq + overflow - 1 && end >= start)
  ) {
    const batch = await store.getMessages(sessionId, {
      fromSeq: start,
      toSeq: end,
      limit: settings.maxBatch,
    });
    if (batch.length > 0) {
      try {
        const content = await summarizer.summarize({ sessionId, messages: batch, previous });
        result.summary = await store.saveSummary(sessionId, {
          fromSeq: previous?.fromSeq ?? batch[0].seq,
          toSeq: batch[batch.length - 1].seq,
          content,
          metadata: { messages: batch.length, ...(previous ? { previousSummaryId: previous.id } : {}) },
        });
        coveredTo = result.summary.toSeq;
      } catch (error) {
        result.error = error;
      }
    }
  }
  const droppable = Math.min(overflow, Math.max(0, Math.min(coveredTo, lastSeq) - firstSeq + 1));
  if (droppable > 0) {
    // An empty append applies the cap in the store's one atomic step.
    await store.appendMessages(sessionId, [], { maxMessages: count - droppable });
    result.dropped = droppable;
  }
  return result;
}

/** Runs compactions, one per session at a time, logging failures instead of throwing them. */
export class Compactor {
  readonly summarizer?: Summarizer;
  readonly #settings: CompactionSettings;
  readonly #running = new Map<string, Promise<CompactionResult>>();

  constructor(summarizer: Summarizer | undefined, settings: CompactionSettings) {
    this.summarizer = summarizer;
    this.#settings = settings;
  }

  /** Compacts a session; joins the running compaction if there is one (a later append catches up). */
  run(store: SessionStore, sessionId: string): Promise<CompactionResult> {
    const summarizer = this.summarizer;
    if (!summarizer) return Promise.resolve({ dropped: 0 });
    const running = this.#running.get(sessionId);
    if (running) return running;
    const run = compactSession(store, sessionId, summarizer, this.#settings)
      .then((result) => {
        if (result.error)
          console.warn(
            `[threadkeep] summarizing session ${sessionId} failed, its messages are kept: ${result.error}`,
          );
        return result;
      })
      .catch((error: unknown): CompactionResult => {
        console.warn(`[threadkeep] compacting session ${sessionId} failed: ${error}`);
        return { dropped: 0, error };
      })
      .finally(() => this.#running.delete(sessionId));
    this.#running.set(sessionId, run);
    return run;
  }

  /** Resolves when no compaction is running. */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running.values());
  }
}
