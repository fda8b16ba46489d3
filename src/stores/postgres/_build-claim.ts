/**
 * The claim of an owner's background vector index build, shared by the IVF (`postgres/_ivf.ts`,
 * table `vector_ivf`) and pgvector's HNSW (`postgres/_hnsw.ts`, table `vector_hnsw`): both register a
 * build as a row `(user_id, model, started_at, ready, …)` and take the claim the same way.
 */
import type { PgSql } from "./_client.js";

/** What a build claims, and how. */
export interface BuildClaim {
  /** The registrations' table. */
  table: "vector_ivf" | "vector_hnsw";
  userId: string;
  model: string;
  /** A registration left unready this long (its process died) no longer holds the claim. */
  staleMs: number;
  /** Takes the owner's exclusive advisory lock in the transaction. */
  lock: (tx: PgSql) => Promise<unknown>;
  /** The new registration's other columns (`user_id`, `model` and `started_at` are set here). */
  columns: Record<string, string | number | Buffer>;
}

/**
 * Registers a build under the owner's exclusive lock, in one transaction: none while another of the
 * owner's model started less than `staleMs` ago and is not ready; else the unready ones (dead builds)
 * are deleted and the new one inserted. Its id, or undefined when another build holds the claim.
 */
export function claimBuild(sql: PgSql, claim: BuildClaim): Promise<number | undefined> {
  const { table, userId, model, staleMs } = claim;
  return sql.begin(async (tx) => {
    await claim.lock(tx as unknown as PgSql);
    const now = Date.now();
    const [busy] =
      await tx`SELECT 1 FROM ${tx(table)} WHERE user_id = ${userId} AND model = ${model} AND NOT ready AND started_at > ${now - staleMs}`;
    if (busy) return undefined;
    await tx`DELETE FROM ${tx(table)} WHERE user_id = ${userId} AND model = ${model} AND NOT ready`;
    const [row] = await tx<{ id: string }[]>`
      INSERT INTO ${tx(table)} ${tx({ user_id: userId, model, started_at: now, ...claim.columns })} RETURNING id`;
    return Number(row.id);
  }) as Promise<number | undefined>;
}
