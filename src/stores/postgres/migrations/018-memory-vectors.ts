/**
 * Schema version 18: embeddings of memories about users. A memory's vector (normalised float32,
 * little-endian, as `bytea`) and its model sit in the memory's own row, so they go with it; an update
 * that changes the text clears them until the memory is embedded again. A model's dimensions are the
 * store's (`embedding_models`, shared with message vectors). Listings name their columns and never
 * read the vector. `bytea` rather than `real[]`: the search reads one user's vectors and compares them
 * in the store's process, where a dot product over `unnest` costs about 0.7 ms a 1536-dimension vector
 * (150 ms for 200 memories).
 */
import type { PgTx } from "../_client.js";

/** Adds `user_memories.embedding_model` and `.embedding` (schema version 18). */
export async function migrateMemoryVectors(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    ALTER TABLE user_memories ADD COLUMN embedding_model text;
    ALTER TABLE user_memories ADD COLUMN embedding bytea;
  `);
}
