import { ThreadkeepError } from "../core/errors.js";
import type { FullStore } from "../core/types.js";
import { importOptional } from "./_util.js";

/** Options that apply to whichever store a URL names. */
export interface StoreUrlOptions {
  /**
   * Inactivity expiry for stores that expire natively (memory: lazy eviction; redis: key TTLs).
   * Persistent SQL/file stores expire through `Memory.expire()` / `threadkeep sessions prune` instead.
   */
  ttlMs?: number;
}

/** The schemes `createStore` understands. */
export const STORE_SCHEMES = ["memory:", "file:", "sqlite:", "postgres://", "postgresql://", "redis://", "rediss://", "redis+cluster://", "rediss+cluster://"];

/** Where a `file:` or `sqlite:` URL points (`file:./data/x`, `file:///abs/x`, `sqlite::memory:`). */
export function pathOfUrl(url: string, scheme: "file:" | "sqlite:"): string {
  let rest = url.slice(scheme.length);
  if (rest.startsWith("//")) rest = rest.slice(2);
  if (rest === "") throw new ThreadkeepError("invalid_store_url", `${scheme} store URL needs a path, e.g. ${scheme}./data`);
  return decodeURIComponent(rest);
}

/**
 * Splits a `sqlite:` URL into its location and whether it asks for `?lease=shared` (turn leases in
 * the file, for several processes on one database), the one parameter it takes. Anything else after
 * a `?` is refused rather than opened as part of the file name (a `?` in a path is written `%3F`).
 */
function sqliteParams(url: string): [location: string, shared: boolean] {
  const at = url.indexOf("?");
  if (at < 0) return [url, false];
  const params = [...new URLSearchParams(url.slice(at + 1))];
  const unknown = params.find(([name]) => name !== "lease");
  if (unknown) {
    throw new ThreadkeepError(
      "invalid_store_url",
      `Unknown sqlite: URL parameter "${unknown[0]}": the one parameter is ?lease=shared (write a ? in the path as %3F)`,
    );
  }
  const lease = params.map(([, value]) => value);
  if (lease.length !== 1 || lease[0] !== "shared") {
    throw new ThreadkeepError("invalid_store_url", `sqlite: URL parameter lease must be "shared", got "${lease.join(",")}"`);
  }
  return [url.slice(0, at), true];
}

/**
 * Opens the store a URL names: `memory:`, `file:./data/sessions` (JSONL), `sqlite:./data/threadkeep.db`
 * (`?lease=shared` keeps turn leases in the file, for several processes sharing it),
 * `postgres://…`, `redis://…`, `redis+cluster://host:port,host:port` (Redis Cluster). The optional clients (`postgres`, `redis`) are imported only when used.
 * @throws ThreadkeepError `invalid_store_url` for an unknown scheme, `missing_dependency` for a missing client.
 */
export async function createStore(url: string, options: StoreUrlOptions = {}): Promise<FullStore> {
  if (typeof url !== "string" || url.trim() === "") {
    throw new ThreadkeepError("invalid_store_url", "A store URL is required, e.g. sqlite:./data/threadkeep.db");
  }
  const trimmed = url.trim();
  if (trimmed === "memory:" || trimmed.startsWith("memory:")) {
    const { createMemoryStore } = await import("./in-process/index.js");
    return createMemoryStore({ ttlMs: options.ttlMs });
  }
  if (trimmed.startsWith("file:")) {
    const { createFileStore } = await import("./file/index.js");
    return createFileStore({ dir: pathOfUrl(trimmed, "file:") });
  }
  if (trimmed.startsWith("sqlite:")) {
    const { createSqliteStore } = await importOptional(() => import("./sqlite/index.js"), "better-sqlite3", "sqlite");
    const [location, shared] = sqliteParams(trimmed);
    return createSqliteStore({ path: pathOfUrl(location, "sqlite:"), crossProcessLease: shared });
  }
  if (trimmed.startsWith("postgres://") || trimmed.startsWith("postgresql://")) {
    const { createPostgresStore } = await import("./postgres/index.js");
    return createPostgresStore({ url: trimmed });
  }
  if (/^rediss?(\+cluster)?:\/\//.test(trimmed)) {
    const { createRedisStore } = await import("./redis/index.js");
    return createRedisStore({ url: trimmed, ttlMs: options.ttlMs });
  }
  const scheme = /^[a-z][a-z0-9+.-]*:/i.exec(trimmed)?.[0] ?? trimmed;
  throw new ThreadkeepError(
    "invalid_store_url",
    `Unknown store URL scheme "${scheme}": use one of memory:, file:<dir>, sqlite:<path>, postgres://…, redis://…, redis+cluster://…`,
  );
}
