/** Opening the PostgreSQL client: the optional driver, loaded on first use, and the pool's settings. */
import type postgres from "postgres";
import { ThreadkeepError } from "../core/errors.js";
import type { PgSql } from "./_postgres-schema.js";

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

/** A pool (connections open lazily) whose unqualified table names resolve in `schema`. */
export async function openClient(url: string, options: ClientOptions): Promise<PgSql> {
  const driver = await loadDriver();
  return driver(url, {
    max: options.poolSize,
    connect_timeout: options.connectTimeoutSeconds,
    onnotice: () => {},
    // Quoting keeps the schema's case.
    connection: {
      application_name: "threadkeep",
      search_path: `"${options.schema}"`,
      statement_timeout: options.queryTimeoutMs,
    },
    // Every bigint here is a time in ms, a seq, a fence or a ticket: all far below 2^53.
    types: {
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
  }) as unknown as PgSql;
}
