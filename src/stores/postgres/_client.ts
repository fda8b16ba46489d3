/** Opening the PostgreSQL client: the optional driver, loaded on first use, and the pool's settings. */
import type postgres from "postgres";
import { ThreadkeepError } from "../../core/errors.js";
import { isConnectionError } from "./_errors.js";
import { PROBE_MS } from "./_timeouts.js";

/** A connected `postgres` client whose `bigint` columns parse to numbers (see `createPostgresStore`). */
export type PgSql = postgres.Sql<Record<string, unknown>>;

/** A transaction of a {@link PgSql} client, as `sql.begin` hands it to its callback. */
export type PgTx = postgres.TransactionSql<Record<string, unknown>>;

/** Imports the optional `postgres` package. @throws `missing_dependency` when it is not installed. */
export async function loadDriver(): Promise<typeof postgres> {
  try {
    return (await import("postgres")).default;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "ERR_MODULE_NOT_FOUND" && String((error as Error).message).includes("'postgres'")) {
      throw new ThreadkeepError(
        "missing_dependency",
        'The postgres:// store needs the optional package "postgres": run npm install postgres',
        { cause: error },
      );
    }
    throw error;
  }
}

/** What {@link openClient} needs besides the URL. */
export interface ClientOptions {
  poolSize: number;
  connectTimeoutSeconds: number;
  /** A validated identifier: it becomes the connections' search_path. */
  schema: string;
  /** The server stops a statement running longer (statement_timeout). */
  queryTimeoutMs: number;
}

/**
 * The store's connections: `main`, one connection, takes every operation that starts while it has none
 * under way; `spill`, the rest of the pool, takes the operations that overlap one on `main` (null for a
 * pool of one, when overlapping statements queue on `main`). The driver hands out the connection idle
 * longest, so a caller making one call after another rotated over every connection a burst had opened;
 * one warm connection answers such a caller faster (client and server) and costs the server less CPU.
 */
export interface PgClients {
  main: PgSql;
  spill: PgSql | null;
  /** Ends both (see the driver's `end`). */
  end(options: { timeout: number }): Promise<void>;
}

/** The longest the driver waits after failed connects before it tries again (s): the store's probe interval. */
const RECONNECT_AFTER_S = PROBE_MS / 1000;

/** The store's connections (opened lazily) whose unqualified table names resolve in `schema`. */
export async function openClient(url: string, options: ClientOptions): Promise<PgClients> {
  const driver = await loadDriver();
  const settings = (max: number) => ({
    max,
    connect_timeout: options.connectTimeoutSeconds,
    // After failed connects the driver refuses queries with the last failure until its next attempt,
    // by default up to 20 s away (threefold per failure). The store keeps its own outage state and
    // probes every PROBE_MS (postgres/_operations.ts, _timeouts.ts), so the driver waits no longer than that: 30 ms,
    // 90 ms, then PROBE_MS. Not 0: a server refusing connections as too many (53300, which the driver
    // takes for transient and tries again while queries wait) would be hammered with new ones: 1,078
    // connects in 1.5 s at 0, 9 with these steps (`_client.test.ts`).
    backoff: (retries: number) => Math.min(RECONNECT_AFTER_S, 0.01 * 3 ** retries),
    onnotice: () => {},
    // The driver's lookup of array types, the first statement of each new connection, runs under that
    // connection's statement_timeout; when a busy server cuts it, the driver drops the rejected promise
    // and Node ends the process on the unhandled rejection (porsager/postgres#1192, #1205, open). So no
    // lookup: the array types threadkeep's SQL uses are declared below.
    fetch_types: false,
    // Quoting keeps the schema's case.
    connection: {
      application_name: "threadkeep",
      search_path: `"${options.schema}"`,
      statement_timeout: options.queryTimeoutMs,
    },
    // Every bigint here is a time in ms, a seq, a fence or a ticket: all far below 2^53.
    types: {
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
      textArray: { to: 1009, from: [1009], serialize: serializeArray, parse: (x: string) => parseArray(x, String) },
      bigintArray: { to: 1016, from: [1016], serialize: serializeArray, parse: (x: string) => parseArray(x, Number) },
      realArray: { to: 1021, from: [1021], serialize: serializeArray, parse: (x: string) => parseArray(x, Number) },
    },
  });
  const main = driver(url, settings(1)) as unknown as PgSql;
  const spill = options.poolSize > 1 ? (driver(url, settings(options.poolSize - 1)) as unknown as PgSql) : null;
  return {
    main,
    spill,
    end: async (how) => {
      await Promise.all([main.end(how), spill?.end(how)]);
    },
  };
}

/**
 * Whether the server answers a new connection within `timeoutMs` (`SELECT 1`, or any error of its own). Apart
 * from the pool on purpose: the pool's connections may all be busy with statements that wait on a
 * lock, which says nothing about whether the server can be reached.
 */
export async function answersNewConnection(url: string, timeoutMs: number): Promise<boolean> {
  const driver = await loadDriver();
  const sql = driver(url, {
    max: 1,
    connect_timeout: timeoutMs / 1000,
    onnotice: () => {},
    // No lookup of array types (see openClient): when the time runs out during it, `end` below destroys
    // the connection and the driver drops the lookup's rejection, which ends the process.
    fetch_types: false,
    connection: { application_name: "threadkeep" },
  });
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    // Any answer of the server counts, a refusal too ("too many connections"): it is there.
    return await Promise.race([
      sql`SELECT 1`.then(
        () => true,
        (error: unknown) => !isConnectionError(error),
      ),
      limit,
    ]);
  } finally {
    clearTimeout(timer);
    await sql.end({ timeout: 0 }).catch(() => {});
  }
}

/**
 * A one-dimensional array parameter as PostgreSQL's array literal: each element quoted, null as NULL.
 * A string is taken as a literal already (the vectors pass theirs so). A loop and two `replaceAll`s
 * rather than `Array.from`, a regular expression and `join`: every append passes its bodies and texts
 * through here, and this way costs ~1 µs for a turn's two arrays of two messages instead of ~5.
 */
export function serializeArray(values: string | ArrayLike<string | number | null>): string {
  if (typeof values === "string") return values;
  let out = "{";
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (i > 0) out += ",";
    if (value === null) {
      out += "NULL";
      continue;
    }
    out += `"${String(value).replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
  }
  return `${out}}`;
}

/** A one-dimensional array column from PostgreSQL's text output (`{a,"b c",NULL}`). */
export function parseArray<T>(text: string, parse: (item: string) => T): (T | null)[] {
  const out: (T | null)[] = [];
  let i = 1;
  while (i < text.length - 1) {
    if (text[i] === ",") i++;
    if (text[i] === '"') {
      let item = "";
      for (i++; text[i] !== '"'; i++) item += text[i] === "\\" ? text[++i] : text[i];
      out.push(parse(item));
      i++;
    } else {
      let end = i;
      while (end < text.length - 1 && text[end] !== ",") end++;
      const item = text.slice(i, end);
      out.push(item === "NULL" ? null : parse(item));
      i = end;
    }
  }
  return out;
}
