/**
 * An older PostgreSQL schema for upgrade tests: the migrations up to `version` applied to `schema`,
 * and a client on it to write data as a process of that version would (by its SQL functions).
 */
import postgres from "postgres";
import type { PgSql } from "../../src/stores/postgres/_client.js";
import { migrate } from "../../src/stores/postgres/_schema.js";
import { TEST_POSTGRES_URL } from "../_services.js";

/** Migrates `schema` to `version`, then runs `fn` with a client whose search path is that schema. */
export async function atSchemaVersion(
  schema: string,
  version: number,
  fn: (sql: postgres.Sql) => Promise<unknown>,
): Promise<void> {
  const sql = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
  try {
    await migrate(sql as unknown as PgSql, schema, version);
    await fn(sql);
  } finally {
    await sql.end();
  }
}
