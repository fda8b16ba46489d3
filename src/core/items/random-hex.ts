import { randomBytes, randomFillSync } from "node:crypto";

/** Random bytes drawn per refill of the pool. */
const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let used = POOL_BYTES;

/**
 * `bytes` bytes from the CSPRNG, as hex. They come from a pool refilled 4 KB at a time (what
 * `crypto.randomUUID` does too): one `randomBytes` call per id measured about 2 µs alone and several
 * times that in a busy server, where a Responses turn makes three ids.
 */
export function randomHex(bytes: number): string {
  if (bytes > POOL_BYTES) return randomBytes(bytes).toString("hex");
  if (used + bytes > POOL_BYTES) {
    randomFillSync(pool);
    used = 0;
  }
  const hex = pool.toString("hex", used, used + bytes);
  used += bytes;
  return hex;
}
