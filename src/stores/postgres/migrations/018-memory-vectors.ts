/**
 * Schema version 18: embeddings of memories about users. A memory's vector (`real[]`, normalised) and
 * its model sit in the memory's own row, so they go with it; an update that changes the text clears
 * them until the memory is embedded again. A model's dimensions are the store's (`embedding_models`,
 * shared with message vectors). Listings name their columns and never read the vector.
 */
import type { PgTx } from "../_client.js";

/** Adds `user_memories.embedding_model` and `.embedding` (schema version 18). */
export async function migrateMemoryVectors(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    ALTER TABLE user_memories ADD COLUMN embedding_model text;
    ALTER TABLE user_memories ADD COLUMN embedding real[];
  `);
}
