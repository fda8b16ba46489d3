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

/** Where a `file:` or `sqlite:` URL points (`file:./data/x`, `file:///abs/x`, `sqlite::memory:`). */
export function pathOfUrl(url: string, scheme: "file:" | "sqlite:"): string {
  let rest = url.slice(scheme.length);
  if (rest.startsWith("//")) rest = rest.slice(2);
  if (rest === "")
    throw new ThreadkeepError("invalid_store_url", `${scheme} store URL needs a path, e.g. ${scheme}./data`);
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
    throw new ThreadkeepError(
      "invalid_store_url",
      `sqlite: URL parameter lease must be "shared", got "${lease.join(",")}"`,
    );
  }
  return [url.slice(0, at), true];
}

/**
 * One built-in store: how a URL names it, where the package publishes it, what it needs installed.
 * The URL parser, package.json's `exports` and the README's store table follow {@link STORES}
 * (test/stores/registry.test.ts checks the last two).
 */
export interface StoreEntry {
  /** The backend's name, and its subpath: `threadkeep/stores/<name>`. */
  readonly name: string;
  /** The URL prefixes that open it, as `createStore` matches them. */
  readonly schemes: readonly string[];
  /** How an error message names its URL form. */
  readonly hint: string;
  /** Its module under `src/` and `dist/`, without the extension: what the subpath points at. */
  readonly module: string;
  /** The optional package (a peer dependency) a user installs to use it, if any. */
  readonly peer?: string;
  /** Opens the store a URL names, importing the store's module (and its client) on first use. */
  open(url: string, options: StoreUrlOptions): Promise<FullStore>;
}

/** The built-in stores, in the order the docs list them. */
export const STORES: readonly StoreEntry[] = [
  {
    name: "memory",
    schemes: ["memory:"],
    hint: "memory:",
    module: "stores/in-process/index",
    open: async (_url, options) => (await import("./in-process/index.js")).createMemoryStore({ ttlMs: options.ttlMs }),
  },
  {
    name: "file",
    schemes: ["file:"],
    hint: "file:<dir>",
    module: "stores/file/index",
    open: async (url) => (await import("./file/index.js")).createFileStore({ dir: pathOfUrl(url, "file:") }),
  },
  {
    name: "sqlite",
    schemes: ["sqlite:"],
    hint: "sqlite:<path>",
    module: "stores/sqlite/index",
    open: async (url) => {
      const { createSqliteStore } = await importOptional(() => import("./sqlite/index.js"), "better-sqlite3", "sqlite");
      const [location, shared] = sqliteParams(url);
      return createSqliteStore({ path: pathOfUrl(location, "sqlite:"), crossProcessLease: shared });
    },
  },
  {
    name: "postgres",
    schemes: ["postgres://", "postgresql://"],
    hint: "postgres://…",
    module: "stores/postgres/index",
    peer: "postgres",
    open: async (url) => (await import("./postgres/index.js")).createPostgresStore({ url }),
  },
  {
    name: "redis",
    schemes: ["redis://", "rediss://", "redis+cluster://", "rediss+cluster://"],
    hint: "redis://…, redis+cluster://…",
    module: "stores/redis/index",
    peer: "redis",
    open: async (url, options) => (await import("./redis/index.js")).createRedisStore({ url, ttlMs: options.ttlMs }),
  },
];

/** The schemes `createStore` understands. */
export const STORE_SCHEMES: string[] = STORES.flatMap((store) => store.schemes);

/**
 * Opens the store a URL names: `memory:`, `file:./data/sessions` (JSONL), `sqlite:./data/threadkeep.db`
 * (`?lease=shared` keeps turn leases in the file, for several processes sharing it),
 * `postgres://…`, `redis://…`, `redis+cluster://host:port,host:port` (Redis Cluster): one of
 * {@link STORES}. The optional clients (`postgres`, `redis`) are imported only when used.
 * @throws ThreadkeepError `invalid_store_url` for an unknown scheme, `missing_dependency` for a missing client.
 * @example
 * ```ts
 * import { createMemory, createStore } from "threadkeep";
 *
 * const store = await createStore("sqlite:./data/threadkeep.db");
 * const memory = createMemory({ store });
 * ```
 */
export async function createStore(url: string, options: StoreUrlOptions = {}): Promise<FullStore> {
  if (typeof url !== "string" || url.trim() === "") {
    throw new ThreadkeepError("invalid_store_url", "A store URL is required, e.g. sqlite:./data/threadkeep.db");
  }
  const trimmed = url.trim();
  const store = STORES.find((entry) => entry.schemes.some((scheme) => trimmed.startsWith(scheme)));
  if (store) return store.open(trimmed, options);
  const scheme = /^[a-z][a-z0-9+.-]*:/i.exec(trimmed)?.[0] ?? trimmed;
  throw new ThreadkeepError(
    "invalid_store_url",
    `Unknown store URL scheme "${scheme}": use one of ${STORES.map((entry) => entry.hint).join(", ")}`,
  );
}
