/**
 * How threadkeep's data lies in PostgreSQL: the schema as versioned forward migrations, and the text
 * search configuration the stored data was built with. Every statement is a tagged template: no SQL
 * is built from strings. Row formats: `postgres/_rows.ts`; the client: `postgres/_client.ts`; errors:
 * `postgres/_errors.ts`.
 */
import type postgres from "postgres";
import { ThreadkeepError } from "../../core/errors.js";
import type { PgSql } from "./_client.js";
import { migrateAppendCapGuard, migrateFencedAppend } from "./_append.js";
import { migrateScopedAppend } from "./_append-scoped.js";
import { migrateActivityFloor } from "./_activity.js";
import { migrateSummaryCap, migrateSummaryCapGuard } from "./_cap.js";
import { migrateHeldWrites } from "./_fence.js";
import { migrateHistory } from "./_history.js";
import { migrateDeferredIndexing } from "./_indexing.js";
import { migrateAppendQueue, migrateInitial, migrateLeaseHolders, migrateSettings } from "./_schema-early.js";
import { migrateTurnDoc, migrateTurnRead, migrateTurnRelease } from "./_turn.js";
import { migrateVectors } from "./_vectors.js";

type Tx = postgres.TransactionSql<Record<string, unknown>>;

/** The first key of the advisory lock taken while migrating; the second is the schema's hash. */
const MIGRATION_LOCK_KEY = 0x7468_6b70; // "thkp".

interface Migration {
  version: number;
  up: (tx: Tx) => Promise<void>;
}

/**
 * Forward migrations, applied in order and never edited once released: a change is a new entry.
 * Timestamps are milliseconds since the epoch (`bigint`), exactly what the contract speaks, taken from
 * the server's clock so that several processes agree. JSON is kept as `text`: `jsonb` cannot hold
 * `\u0000` and reorders keys, and the store never queries inside it.
 */
const MIGRATIONS: Migration[] = [
  { version: 1, up: (tx) => migrateInitial(tx) },
  { version: 2, up: (tx) => migrateAppendQueue(tx) },
  { version: 3, up: (tx) => migrateSettings(tx) },
  { version: 4, up: (tx) => migrateHistory(tx) },
  { version: 5, up: (tx) => migrateVectors(tx) },
  { version: 6, up: (tx) => migrateLeaseHolders(tx) },
  { version: 7, up: (tx) => migrateTurnRead(tx) },
  { version: 8, up: (tx) => migrateTurnRelease(tx) },
  { version: 9, up: (tx) => migrateSummaryCap(tx) },
  { version: 10, up: (tx) => migrateHeldWrites(tx) },
  { version: 11, up: (tx) => migrateAppendCapGuard(tx) },
  {
    version: 12,
    up: async (tx) => {
      await migrateDeferredIndexing(tx);
      await migrateActivityFloor(tx);
      await migrateSummaryCapGuard(tx);
    },
  },
  { version: 13, up: (tx) => migrateFencedAppend(tx) },
  { version: 14, up: (tx) => migrateTurnDoc(tx) },
  { version: 15, up: (tx) => migrateScopedAppend(tx) },
];

/** The newest schema version this code knows. */
export const SCHEMA_VERSION = MIGRATIONS.at(-1)!.version;

/**
 * Brings `schema` up to {@link SCHEMA_VERSION} (or only up to `upTo`, as tests build an older schema).
 * Concurrent starters serialise on an advisory lock held for the migrating transaction, so exactly one
 * applies each step and the others find it done.
 * @throws `schema_version_unsupported` when the database is newer than this code.
 */
export async function migrate(sql: PgSql, schema: string, upTo = SCHEMA_VERSION): Promise<void> {
  await sql.begin(async (tx) => {
    // A migration may rebuild an index or rewrite a table (v12: ~13 s per million messages): the
    // connection's statement_timeout (the store's query timeout) would cancel it on every start.
    await tx`SET LOCAL statement_timeout = 0`;
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY}, hashtext(${schema}))`;
    const [exists] = await tx`SELECT 1 FROM pg_namespace WHERE nspname = ${schema}`;
    if (!exists) await tx`CREATE SCHEMA ${tx(schema)}`;
    await tx`CREATE TABLE IF NOT EXISTS threadkeep_migrations (version integer PRIMARY KEY, applied_at bigint NOT NULL)`;
    const [{ version }] =
      await tx`SELECT coalesce(max(version), 0)::integer AS version FROM threadkeep_migrations`;
    if (version > SCHEMA_VERSION) {
      throw new ThreadkeepError(
        "schema_version_unsupported",
        `PostgreSQL schema "${schema}" is at version ${version}; this threadkeep knows up to ${SCHEMA_VERSION}. Upgrade threadkeep.`,
      );
    }
    for (const migration of MIGRATIONS) {
      if (migration.version <= version || migration.version > upTo) continue;
      await migration.up(tx);
      await tx`
        INSERT INTO threadkeep_migrations (version, applied_at)
        VALUES (${migration.version}, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)`;
    }
  });
}
/** @throws `invalid_request` when `lang` is no text search configuration of the server. */
export async function checkTextSearchConfig(sql: PgSql, lang: string): Promise<void> {
  try {
    await sql`SELECT ${lang}::regconfig`;
  } catch (error) {
    if ((error as { code?: string }).code !== "42704") throw error;
    throw new ThreadkeepError("invalid_request", `Unknown PostgreSQL text search configuration "${lang}"`, {
      cause: error,
    });
  }
}

/**
 * Makes full-text search use `lang`: when the stored `tsv` columns were built with another
 * configuration (or an unknown one, from before the setting was recorded) they are rebuilt, once,
 * under a lock so concurrent starters do it once.
 * @throws `invalid_request` when `lang` is no text search configuration of the server.
 */
export async function useTextSearchConfig(sql: PgSql, lang: string, schema: string): Promise<void> {
  await checkTextSearchConfig(sql, lang);
  const current = async (q: PgSql | Tx) =>
    (await q<{ value: string }[]>`SELECT value FROM threadkeep_settings WHERE key = 'fts_language'`)[0]?.value;
  if ((await current(sql)) === lang) return;
  await sql.begin(async (tx) => {
    // Re-indexing every message outlasts the query timeout on a large table (see migrate).
    await tx`SET LOCAL statement_timeout = 0`;
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY + 1}, hashtext(${schema}))`;
    if ((await current(tx)) === lang) return;
    await tx`UPDATE messages SET tsv = to_tsvector(${lang}::regconfig, left(search_text, 100000))`;
    await tx`
      INSERT INTO threadkeep_settings (key, value) VALUES ('fts_language', ${lang})
      ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
  });
}
