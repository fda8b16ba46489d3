/**
 * Full-text indexing off the append (schema version 12: `migrations/012-deferred-indexing.ts`).
 *
 * An append used to build each message's `tsvector` and insert it into the GIN index inside its own
 * statement: 50–75 µs of server CPU and 340 WAL bytes per message before the commit
 * (docs/decisions/0002-postgres-schema.md). Now the append stores `tsv` NULL, a row a small partial index lists as
 * pending, and {@link SearchIndexer} fills it in afterwards, a bounded batch per statement, in the
 * background. Search stays complete: it matches a pending row by the tsvector computed on the spot
 * (`postgres/_search.ts`), so a message is found the moment its append returns, and a search never
 * writes. The batch commits asynchronously: indexed text is derived data, and a batch a crash loses
 * is pending again, to be indexed by the next drain.
 *
 * The append functions of earlier versions are unchanged: given a text search configuration they
 * index as before (a process of the previous version keeps doing so during an upgrade); this
 * version's store passes none for appends of up to {@link DEFER_UP_TO} messages, and `to_tsvector`
 * being strict, the row's `tsv` is then NULL.
 */
import type { PgRun } from "./_operations.js";

/**
 * Most messages an append leaves pending; a larger one (an import, a migration, a whole history) is
 * indexed in its own statement as before: its latency is not a turn's, and a backlog that large would
 * make searches compute many tsvectors until the drain caught up.
 */
export const DEFER_UP_TO = 16;
/** Pending messages indexed per drain statement: a bound on the work (and row locks) of one. */
export const INDEX_BATCH = 200;
/** How long after an append the drain starts by default, so a burst of appends is indexed in few statements. */
export const INDEX_DELAY_MS = 200;

/** The text search configuration an append of `count` messages passes: none (pending) when small. */
export const appendLang = (count: number, lang: string): string | null => (count <= DEFER_UP_TO ? null : lang);

/**
 * Drains the pending rows in the background: {@link SearchIndexer.poke} after a write schedules a
 * drain a delay later ({@link INDEX_DELAY_MS} by default); a drain runs one bounded statement after another while they come
 * back full, one at a time per store. A failed drain is dropped: the rows stay pending (search still
 * finds them) and the next write schedules another.
 */
export class SearchIndexer {
  readonly #run: PgRun;
  readonly #lang: string;
  readonly #delayMs: number;
  #timer: NodeJS.Timeout | null = null;
  #draining: Promise<void> | null = null;
  #again = false;
  #closed = false;

  constructor(run: PgRun, lang: string, delayMs = INDEX_DELAY_MS) {
    this.#run = run;
    this.#lang = lang;
    this.#delayMs = delayMs;
  }

  /** Schedules a drain (once: pokes while one is scheduled or running add nothing). */
  poke(): void {
    if (this.#closed) return;
    if (this.#draining) {
      this.#again = true;
      return;
    }
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#draining = this.#drain().finally(() => {
        this.#draining = null;
        if (this.#again) {
          this.#again = false;
          this.poke();
        }
      });
    }, this.#delayMs);
    this.#timer.unref();
  }

  /** Stops scheduling drains and waits for the one under way. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#draining;
  }

  async #drain(): Promise<void> {
    try {
      while (!this.#closed) {
        const done = await this.#run(
          "indexPending",
          async (sql) => {
            const [row] = await sql<
              { n: number }[]
            >`SELECT threadkeep_index_pending(${this.#lang}::regconfig, ${INDEX_BATCH}) AS n`;
            return row.n;
          },
          { background: true },
        );
        if (done < INDEX_BATCH) return;
      }
    } catch {
      // Left pending; see the class comment.
    }
  }
}
