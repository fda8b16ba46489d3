/**
 * Table statistics that follow the tables on a server with autovacuum off.
 *
 * PostgreSQL plans every statement from the tables' statistics and keeps a connection's plans until
 * those statistics change. Autovacuum (on by default) re-analyzes a table once enough of it changed,
 * so the plans follow the data. With autovacuum off and no scheduled `ANALYZE`, statistics taken
 * while the tables were nearly empty stay forever: a probe by key then looks dearer than reading the
 * whole table, and the store's reads by key (a session's messages, its state and summaries, a foreign
 * key's check) read whole tables on every call. Measured: 20 turns with those reads, after 20,000
 * sessions were added under plans made on nearly empty tables, read 4,000,762 `sessions` rows and
 * 1,607,992 `messages` rows by sequential scans (`test/stores/postgres-turn-plans.service.test.ts`).
 * The turn's own functions keep to their indexes whatever the statistics say (schema 22), but these
 * single statements are planned by PostgreSQL alone.
 *
 * So while autovacuum is off (server-wide, or for one of the store's tables), the store does what
 * autovacuum's analyze would: every {@link StatisticsKeeper} interval it asks which of its tables
 * changed by more than autovacuum's own analyze threshold (`autovacuum_analyze_threshold` +
 * `autovacuum_analyze_scale_factor` × rows) since they were last analyzed, and analyzes those, one
 * table per statement, in the background. One process of those sharing the schema does it at a time
 * (a transaction-level advisory lock). With autovacuum on it only asks, and leaves the work to
 * autovacuum. `ANALYZE` reads a sample (at most 300 × `default_statistics_target` rows), takes a lock
 * that only other `ANALYZE`, `VACUUM` and schema changes wait on, and invalidates the cached plans
 * that depend on the table, so every connection plans afresh.
 */
import { ThreadkeepError } from "../../core/errors.js";
import type { PgRun } from "./_operations.js";

/** How often the store asks whether its tables' statistics are stale, by default (ms). */
const STATISTICS_INTERVAL_MS = 60_000;
/** The longest delay a Node.js timer takes (2^31 - 1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2_147_483_647;
/** How long one table's `ANALYZE` may take: a sample of a large table read from disk. */
const ANALYZE_TIMEOUT_MS = 120_000;
/** The advisory lock key that lets one process of a schema analyze at a time (with the schema's name). */
const LOCK_CLASS = 0x74_6b_61_6e; // "tkan"

/**
 * The store's tables whose statistics are stale while autovacuum is off for them: changed (rows
 * inserted, updated or deleted) by more than autovacuum's analyze threshold since their last analyze.
 */
const STALE_TABLES = `
  SELECT c.relname AS name
  FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
  WHERE s.schemaname = current_schema()
    AND (NOT current_setting('autovacuum')::boolean
         OR EXISTS (SELECT 1 FROM unnest(c.reloptions) o WHERE lower(o) IN
                    ('autovacuum_enabled=false', 'autovacuum_enabled=off', 'autovacuum_enabled=no', 'autovacuum_enabled=0')))
    AND s.n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float8
        + current_setting('autovacuum_analyze_scale_factor')::float8 * greatest(c.reltuples, 0)
  ORDER BY c.relname`;

/**
 * Analyzes the store's stale tables while autovacuum is off (see the module comment), every interval
 * after {@link StatisticsKeeper.start}. A failed check is dropped (the next one tries again); checks
 * never overlap.
 */
export class StatisticsKeeper {
  readonly #run: PgRun;
  readonly #schema: string;
  readonly #intervalMs: number | false;
  #timer: NodeJS.Timeout | null = null;
  #checking: Promise<void> | null = null;
  #closed = false;

  /**
   * @param intervalMs How often to check; `false` never checks (a scheduled `ANALYZE` does the work).
   * @throws ThreadkeepError `invalid_request` for anything else than `false` or a number of ms above 0
   *   and at most a timer's longest delay: Node would coerce a string, and fire a longer one every ms.
   */
  constructor(run: PgRun, schema: string, intervalMs: number | false = STATISTICS_INTERVAL_MS) {
    if (intervalMs !== false && !(typeof intervalMs === "number" && intervalMs > 0 && intervalMs <= MAX_TIMER_MS)) {
      throw new ThreadkeepError(
        "invalid_request",
        `statisticsIntervalMs is a number of milliseconds above 0 and at most ${MAX_TIMER_MS}, or false; got ${String(intervalMs)}`,
      );
    }
    this.#run = run;
    this.#schema = schema;
    this.#intervalMs = intervalMs;
  }

  /** Checks every interval from now on, the first one interval from now (once; later calls add nothing). */
  start(): void {
    if (this.#closed || this.#timer || this.#intervalMs === false) return;
    this.#timer = setInterval(() => {
      // A check still under way when the next is due is not doubled.
      this.#checking ??= this.#analyzeStale()
        .catch(() => {})
        .finally(() => {
          this.#checking = null;
        });
    }, this.#intervalMs);
    this.#timer.unref();
  }

  /** Stops checking and waits for the check under way. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#checking;
  }

  /** Analyzes the tables that are stale now, one statement each; nothing when another process of the schema is at it. */
  async #analyzeStale(): Promise<void> {
    const stale = await this.#run("checkStatistics", (sql) => sql.unsafe<{ name: string }[]>(STALE_TABLES), {
      background: true,
    });
    if (stale.length === 0) return;
    await this.#run(
      "analyzeTables",
      (sql) =>
        sql.begin(async (tx) => {
          const [lock] = await tx<{ ok: boolean }[]>`
            SELECT pg_try_advisory_xact_lock(${LOCK_CLASS}, hashtext(${this.#schema})) AS ok`;
          if (!lock.ok) return;
          await tx.unsafe(`SET LOCAL statement_timeout = ${ANALYZE_TIMEOUT_MS}`);
          for (const { name } of stale) {
            if (this.#closed) break;
            // Names come from pg_class, quoted as identifiers; the schema is the connection's.
            await tx.unsafe(`ANALYZE "${name.replaceAll('"', '""')}"`);
          }
        }),
      { background: true, timeoutMs: ANALYZE_TIMEOUT_MS * stale.length },
    );
  }
}
