import type { RedisConnection } from "./_connection.js";
import { decodeStoredVector, encodeStoredVector, type VectorSidecar } from "../_vector-sidecar.js";
import type { StoredVector } from "../_vectors.js";

/**
 * Vectors: a hash per session under its hash tag (seq → vector line), expiring with the session's
 * TTL; a global hash of each model's dimensions.
 */
export function redisVectorSidecar(
  db: RedisConnection,
  base: (id: string) => string,
  prefix: string,
  ttlMs: number,
): VectorSidecar {
  const modelsKey = `${prefix}embedding-models`;
  return {
    async read(id) {
      const fields = await db.send<string[]>(["HGETALL", `${base(id)}vec`]);
      const out: StoredVector[] = [];
      for (let i = 1; i < fields.length; i += 2) {
        const v = decodeStoredVector(fields[i]);
        if (v) out.push(v);
      }
      return out;
    },
    async write(id, vectors) {
      const key = `${base(id)}vec`;
      await db.send(["HSET", key, ...vectors.flatMap((v) => [String(v.seq), encodeStoredVector(v)])]);
      if (ttlMs > 0) await db.send(["PEXPIRE", key, String(ttlMs)]);
    },
    async dims(model) {
      const dims = await db.send<string | null>(["HGET", modelsKey, model]);
      return dims === null ? undefined : Number(dims);
    },
    async claimDims(model, dims) {
      await db.send(["HSETNX", modelsKey, model, String(dims)]);
      return Number(await db.send<string>(["HGET", modelsKey, model]));
    },
  };
}
