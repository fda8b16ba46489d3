/**
 * Schema version 16: memories about users (issue 25). One row a memory, keyed by its user and id, so
 * another user's id is simply not there; the earlier texts are a JSON array in the row (text, as the
 * rest of the store's JSON), gone with it. The listing index serves one user's memories newest first;
 * ids compare bytewise (`COLLATE "C"`), as every other store orders them.
 */
import type { PgTx } from "../_client.js";

/** Creates `user_memories` (schema version 16). */
export async function migrateUserMemories(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    CREATE TABLE user_memories (
      user_id text NOT NULL,
      id text COLLATE "C" NOT NULL,
      text text NOT NULL,
      created_at bigint NOT NULL,
      updated_at bigint NOT NULL,
      source text NOT NULL,
      metadata text NOT NULL,
      history text NOT NULL,
      PRIMARY KEY (user_id, id)
    );
    CREATE INDEX user_memories_listing ON user_memories (user_id, updated_at DESC, id DESC);
  `);
}
