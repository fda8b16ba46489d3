/**
 * How threadkeep's data lies in PostgreSQL: the runner of the versioned forward migrations (one file
 * each in `postgres/migrations/`), and the text search configuration the stored data was built with.
 * Every statement is a tagged template: no SQL is built from strings. Row formats: `postgres/_rows.ts`; the client: `postgres/_client.ts`; errors:
 * `postgres/_errors.ts`.
 */
import { ThreadkeepError } from "../../core/errors.js";
import type { PgSql, PgTx } from "./_client.js";
import { MIGRATIONS } from "./migrations/index.js";

/** The first key of the advisory lock taken while migrating; the second is the schema's hash. */
const MIGRATION_LOCK_KEY = 0x7468_6b70; // "thkp".

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
    const [{ version }] = await tx`SELECT coalesce(max(version), 0)::integer AS version FROM threadkeep_migrations`;
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
  const current = async (q: PgSql | PgTx) =>
    (await q<{ value: string }[]>`SELECT value FROM threadkeep_settings WHERE key = 'fts_language'`)[0]?.value;
  if ((await current(sql)) === lang) return;
  await sql.begin(async (tx) => {
    // Re-indexing every message outlasts the query timeout on a large table (see migrate).
    await tx`SET LOCAL statement_timeout = 0`;
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY + 1}, hashtext(${schema}))`;
    if ((await current(tx)) === lang) return;
    await tx`UPDATE messages SET tsv = to_tsvector(${lang}::regconfig, left(search_text, 100000))`;
    // The owners' term statistics count lexemes of the configuration they were built with (version 19).
    await tx`SELECT threadkeep_recount_terms()`;
    await tx`
      INSERT INTO threadkeep_settings (key, value) VALUES ('fts_language', ${lang})
      ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
  });
}
