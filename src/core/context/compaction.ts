import { saveSummaryOf } from "../incarnation.js";
import type { AppendOptions, Message, FullStore, Summary, SummaryInput } from "../types.js";
import { type CompactionSettings, CompactionHints, type SessionShape } from "./compaction-hints.js";
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
  /**
   * The ceiling per session: the most messages a session keeps whatever the summarizer does. The cap
   * (`maxMessages`) drops only summarised messages; while summaries fail (a model down, a long outage)
   * a session grows past it, up to here, where the oldest go, summarised or not, in the write's own
   * step (later turns then answer with `history-omitted`). 0: no ceiling (not recommended).
   * @default 2 × maxMessages
   */
  hardCap?: number;
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

/** The ceiling of a session's messages whatever the summaries do (0: none): `hardCap`, by default twice the cap. */
export function hardCapOf(settings: Pick<CompactionSettings, "maxMessages" | "hardCap">): number {
  if (settings.maxMessages <= 0) return 0;
  const hard = Math.floor(settings.hardCap ?? 2 * settings.maxMessages);
  // Below the cap it would drop what the cap keeps: the cap is the floor.
  return hard <= 0 ? 0 : Math.max(hard, settings.maxMessages);
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
 * message cap to messages a summary covers, never to others (the store itself bounds the cap by the
 * summaries it holds, so a session deleted and created again meanwhile loses nothing). A failed summary loses nothing: the
 * error is returned and the messages stay until a later compaction succeeds.
 *
 * The summary is saved only into the session it was made from: the session is read before its
 * messages, and the save names its `createdAt` ({@link SummaryInput.sessionCreatedAt}). If the
 * session was deleted, or deleted and created again under its id, while the summarizer ran, the store
 * refuses the save in its own atomic step (`session_not_found`, returned as `error`), so the new
 * session gets neither the old one's text nor a summary `toSeq` that would let the cap drop its messages.
 * @returns what it did, and what it saw of the session afterwards (none: the session is empty).
 */
export async function compactSession(
  store: FullStore,
  sessionId: string,
  summarizer: Summarizer,
  settings: CompactionSettings,
): Promise<CompactionResult & { shape?: SessionShape }> {
  // The session first: messages read after it are of this incarnation or a later one (refused below).
  const session = await store.getSession(sessionId);
  if (!session) return { dropped: 0 };
  // Without a cap the count is not needed: one read fewer.
  const [summaries, newest, oldest, count] = await Promise.all([
    store.listSummaries(sessionId),
    store.getMessages(sessionId, { last: 1 }),
    store.getMessages(sessionId, { limit: 1 }),
    settings.maxMessages > 0 ? store.countMessages(sessionId) : 0,
  ]);
  if (newest.length === 0 || oldest.length === 0) return { dropped: 0 };
  const lastSeq = newest[0].seq;
  const firstSeq = oldest[0].seq;
  const previous = latestSummary(summaries);
  let coveredTo = previous?.toSeq ?? 0;
  const overflow = settings.maxMessages > 0 ? Math.max(0, count - settings.maxMessages) : 0;
  // Summarise up to the window, or further when the cap must drop messages the window still holds.
  const end = Math.max(lastSeq - settings.window, firstSeq + overflow - 1);
  const start = Math.max(coveredTo, firstSeq - 1) + 1;
  const result: CompactionResult = { dropped: 0 };
  if (end - start + 1 > settings.threshold || (overflow > 0 && coveredTo < firstSeq + overflow - 1 && end >= start)) {
    const batch = await store.getMessages(sessionId, {
      fromSeq: start,
      toSeq: end,
      limit: settings.maxBatch,
    });
    if (batch.length > 0) {
      try {
        const content = await summarizer.summarize({ sessionId, messages: batch, previous });
        const input: SummaryInput = {
          fromSeq: previous?.fromSeq ?? batch[0].seq,
          toSeq: batch[batch.length - 1].seq,
          content,
          metadata: { messages: batch.length, ...(previous ? { previousSummaryId: previous.id } : {}) },
        };
        result.summary = await saveSummaryOf(store, session, input);
        coveredTo = result.summary.toSeq;
      } catch (error) {
        result.error = error;
      }
    }
  }
  const droppable = Math.min(overflow, Math.max(0, Math.min(coveredTo, lastSeq) - firstSeq + 1));
  if (droppable > 0) {
    // An empty append applies the cap in the store's one atomic step; bounded by the summaries where
    // the store can, since what was read above may be stale by now.
    await store.appendMessages(sessionId, [], {
      maxMessages: settings.maxMessages,
      keepUnsummarized: true,
      hardCap: hardCapOf(settings),
    });
    result.dropped = droppable;
  }
  // Dropping n of the oldest moves the first seq on by at least n (by more where seqs have gaps).
  return { ...result, shape: { coveredTo, firstSeq: firstSeq + result.dropped, lastSeq } };
}

/**
 * Runs compactions, one per session at a time, logging failures instead of throwing them. After a
 * write it first asks its {@link CompactionHints}: when what its last check saw shows that the write
 * cannot have made anything due (the common case: most turns neither push a summary's worth of
 * messages out of the window nor reach the cap), it reads nothing. The cap itself rides on the
 * write ({@link writeCap}) where the store can bound it by its summaries.
 */
export class Compactor {
  readonly summarizer?: Summarizer;
  readonly #settings: CompactionSettings;
  readonly #running = new Map<string, Promise<CompactionResult>>();
  readonly #hints: CompactionHints;

  constructor(summarizer: Summarizer | undefined, settings: CompactionSettings) {
    this.summarizer = summarizer;
    this.#settings = settings;
    this.#hints = new CompactionHints(settings);
  }

  /**
   * The cap a write to `store` carries. Without a summarizer, the plain cap (the oldest go). With one,
   * the cap bounded by the session's summaries, applied in the write's own step (part of the
   * summaries' contract): a write past the cap then drops what is summarised already, and no separate
   * write is needed.
   */
  writeCap(): Pick<AppendOptions, "maxMessages" | "keepUnsummarized" | "hardCap"> {
    const maxMessages = this.#settings.maxMessages;
    if (maxMessages <= 0) return {};
    if (!this.summarizer) return { maxMessages };
    const hardCap = hardCapOf(this.#settings);
    return hardCap > 0 ? { maxMessages, keepUnsummarized: true, hardCap } : { maxMessages, keepUnsummarized: true };
  }

  /**
   * What follows a write that stored `added` (a write that carried {@link writeCap}): nothing when the
   * hint shows that no summary can be due, or only the cap, which the write applied already where
   * the store bounds it by its summaries; otherwise a full check. A write that stored nothing (a
   * truncation, a replay) is checked as before.
   */
  afterWrite(store: FullStore, sessionId: string, added: readonly Message[]): Promise<CompactionResult> {
    if (!this.summarizer) return Promise.resolve({ dropped: 0 });
    const running = this.#running.get(sessionId);
    if (running) return running;
    if (added.length === 0) return this.run(store, sessionId);
    const plan = this.#hints.plan(sessionId, added[0].seq, added[added.length - 1].seq);
    if (plan === "none" || plan === "cap") return Promise.resolve({ dropped: 0 });
    return this.run(store, sessionId);
  }

  /** Compacts a session; joins the running compaction if there is one (a later append catches up). */
  run(store: FullStore, sessionId: string): Promise<CompactionResult> {
    const summarizer = this.summarizer;
    if (!summarizer) return Promise.resolve({ dropped: 0 });
    const running = this.#running.get(sessionId);
    if (running) return running;
    const check = compactSession(store, sessionId, summarizer, this.#settings).then(({ shape, ...result }) => {
      if (shape) this.#hints.learn(sessionId, shape);
      else this.#hints.forget(sessionId);
      if (result.error)
        console.warn(`[threadkeep] summarizing session ${sessionId} failed, its messages are kept: ${result.error}`);
      return result;
    });
    return this.#track(sessionId, check);
  }

  /** One compaction per session at a time; failures are logged, not thrown. */
  #track(sessionId: string, work: Promise<CompactionResult>): Promise<CompactionResult> {
    const run = work
      .catch((error: unknown): CompactionResult => {
        this.#hints.forget(sessionId);
        console.warn(`[threadkeep] compacting session ${sessionId} failed: ${error}`);
        return { dropped: 0, error };
      })
      .finally(() => this.#running.delete(sessionId));
    this.#running.set(sessionId, run);
    return run;
  }

  /** Forgets what it learned of a session (deleted, or cleared). */
  forget(sessionId: string): void {
    this.#hints.forget(sessionId);
  }

  /** Resolves when no compaction is running. */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running.values());
  }
}
