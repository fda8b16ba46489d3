/**
 * Schema version 20: an IVF index over large owners' message vectors, without pgvector
 * (`postgres/_ivf.ts`). `vector_ivf` holds one training of an owner's vectors of a model: its
 * centroids (normalised float32, packed, `cells × dims`), the int8 scale and whether it is still being
 * built; `vector_codes` holds each vector's cell and int8 code for that training, keyed by training and
 * cell so a probe reads whole cells through the primary key. Both are caches of `message_vectors`,
 * which stays the source of truth: a code goes with its vector (foreign key), a training's codes go
 * with the training, and an owner's trainings go with its last session (their centroids are averages
 * of its vectors).
 */
import type { PgTx } from "../_client.js";

/** Adds `vector_ivf`, `vector_codes` and the trigger dropping an erased owner's trainings (schema version 20). */
export async function migrateVectorCells(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    CREATE TABLE vector_ivf (
      id bigserial PRIMARY KEY,
      user_id text COLLATE "C" NOT NULL,
      model text NOT NULL,
      ready boolean NOT NULL DEFAULT false,
      started_at bigint NOT NULL,
      trained integer NOT NULL,
      scale real NOT NULL,
      dims integer NOT NULL,
      centroids bytea NOT NULL
    );
    CREATE INDEX vector_ivf_owner ON vector_ivf (user_id, model);
    CREATE TABLE vector_codes (
      ivf bigint NOT NULL REFERENCES vector_ivf (id) ON DELETE CASCADE,
      cell integer NOT NULL,
      session_id text COLLATE "C" NOT NULL,
      seq bigint NOT NULL,
      code bytea NOT NULL,
      PRIMARY KEY (ivf, cell, session_id, seq),
      FOREIGN KEY (session_id, seq) REFERENCES message_vectors (session_id, seq) ON DELETE CASCADE
    );
    -- One code a vector and training (a build and a writer racing keep the first), found when the
    -- vector is replaced (and by the foreign key's cascade).
    CREATE UNIQUE INDEX vector_codes_vector ON vector_codes (session_id, seq, ivf);

    CREATE FUNCTION threadkeep_ivf_owner_gone() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM sessions s WHERE s.user_id = OLD.user_id AND s.id <> OLD.id) THEN
        DELETE FROM vector_ivf WHERE user_id = OLD.user_id;
      END IF;
      RETURN NULL;
    END
    $fn$;
    CREATE TRIGGER sessions_ivf_owner_gone AFTER DELETE ON sessions
      FOR EACH ROW EXECUTE FUNCTION threadkeep_ivf_owner_gone();
  `);
}
