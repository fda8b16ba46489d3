/** PostgreSQL schema version 5 (the embeddings that use it: `postgres/_vectors.ts`). */
import type { PgTx } from "../_client.js";

/** Schema version 5: message_vectors and embedding_models. */
export async function migrateVectors(tx: PgTx): Promise<void> {
  await tx`
    CREATE TABLE message_vectors (
      session_id text COLLATE "C" NOT NULL,
      seq bigint NOT NULL,
      created_at bigint NOT NULL,
      model text NOT NULL,
      vector real[] NOT NULL,
      PRIMARY KEY (session_id, seq),
      FOREIGN KEY (session_id, seq) REFERENCES messages (session_id, seq) ON DELETE CASCADE
    )`;
  await tx`CREATE TABLE embedding_models (model text PRIMARY KEY, dims integer NOT NULL)`;
}
