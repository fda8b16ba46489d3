/** PostgreSQL schema version 3, as released: never edited, not even its indentation; a change is a new version. */
import type { PgTx } from "../_client.js";

/** Schema version 3: the `threadkeep_settings` table. */
export async function migrateSettings(tx: PgTx): Promise<void> {
  // Store-wide settings the data depends on, e.g. the text search configuration `tsv` was built
  // with: opening with another one rebuilds it (see useTextSearchConfig).
  await tx`CREATE TABLE threadkeep_settings (key text PRIMARY KEY, value text NOT NULL)`;
}
