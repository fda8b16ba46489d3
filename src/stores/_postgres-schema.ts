/**
 * How threadkeep's data lies in PostgreSQL: the schema as versioned forward migrations, the row
 * formats, opening the client, and the mapping of driver errors to threadkeep's coded errors.
 * Every statement is a tagged template: no SQL is built from strings.
 */
import type postgres from "postgres";
import { ThreadkeepError } from "../core/errors.js";
import type { Message, MessageInput, Session, Summary } from "../core/types.js";
import { migrateAppendCapGuard } from "./_postgres-append.js";
import { migrateSummaryCap } from "./_postgres-cap.js";
import { migrateHeldWrites } from "./_postgres-fence.js";
import { migrateHistory } from "./_postgres-history.js";
import { migrateTurnRead, migrateTurnRelease } from "./_postgres-turn.js";
import { migrateVectors } from "./_postgres-vectors.js";

/** A connected `postgres` client whose `bigint` columns parse to numbers (see `createPostgresStore`). */
export type PgSql = postgres.Sql<Record<string, unknown>>;
type Tx = postgres.TransactionSql<Record<string, unknown>>;

/** The first key of the advisory lock taken while migrating; the second is the schema's hash. */
const MIGRATION_LOCK_KEY = 0x7468_6b70; // "thkp".

interface Migration {
  version: number;
  up: (tx: Tx) => Promise<void>;
}

/**
 * Forward migrations, applied in order and never edited once released: a change is a new entry.
 * Timestamps are milliseconds since the epoch (`bigint`), exactly what the contract speaks, taken from
 * the server's clock so that several processes agree. JSON is kept as `text`: `jsonb` cannot hold
 * `\u0000` and reorders keys, and the store never queries inside it.
 */
const MIGRATIONS: Migration[] = [
  {
    version: 1,
    up: async (tx) => {
      await tx`
        CREATE FUNCTION threadkeep_now_ms() RETURNS bigint LANGUAGE sql VOLATILE
        AS $$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$`;
      // COLLATE "C": byte order, as JavaScript compares ids in the other stores, and cheaper to index.
      await tx`
        CREATE TABLE sessions (
          id text COLLATE "C" PRIMARY KEY,
          user_id text COLLATE "C" NOT NULL,
          created_at bigint NOT NULL,
          last_activity_at bigint NOT NULL,
          last_seq bigint NOT NULL DEFAULT 0,
          metadata text NOT NULL DEFAULT '{}'
        )`;
      await tx`CREATE INDEX sessions_user_activity ON sessions (user_id, last_activity_at DESC, id DESC)`;
      await tx`CREATE INDEX sessions_last_activity ON sessions (last_activity_at)`;
      await tx`
        CREATE TABLE messages (
          session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
          seq bigint NOT NULL,
          created_at bigint NOT NULL,
          body text NOT NULL,
          search_text text NOT NULL,
          tsv tsvector NOT NULL,
          PRIMARY KEY (session_id, seq)
        )`;
      await tx`CREATE INDEX messages_tsv ON messages USING gin (tsv)`;
      await tx`
        CREATE TABLE summaries (
          id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
          from_seq bigint NOT NULL,
          to_seq bigint NOT NULL,
          created_at bigint NOT NULL,
          content text NOT NULL,
          metadata text
        )`;
      await tx`CREATE INDEX summaries_session ON summaries (session_id, from_seq, id)`;
      await tx`
        CREATE TABLE session_state (
          session_id text COLLATE "C" PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
          version integer NOT NULL,
          data text NOT NULL
        )`;
      // Leases outlive nothing they guard: no foreign key, because a turn may start before its session exists.
      await tx`CREATE SEQUENCE lease_fence`;
      await tx`
        CREATE TABLE leases (
          session_id text COLLATE "C" PRIMARY KEY,
          fence bigint NOT NULL,
          expires_at bigint NOT NULL
        )`;
      await tx`
        CREATE TABLE lease_queue (
          ticket bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          session_id text COLLATE "C" NOT NULL,
          alive_until bigint NOT NULL
        )`;
      await tx`CREATE INDEX lease_queue_session ON lease_queue (session_id, ticket)`;
      await tx`CREATE INDEX lease_queue_alive ON lease_queue (alive_until)`;
      // One round trip per append. The UPDATE of the session row is the seq lock: concurrent appends
      // queue on it, and each statement after it sees every append committed before (READ COMMITTED
      // takes a fresh snapshot per statement of a volatile function), so the cap deletes what it must.
      await tx`
        CREATE FUNCTION threadkeep_append(
          p_session text, p_bodies text[], p_texts text[], p_max bigint, p_fence bigint, p_lang regconfig
        ) RETURNS TABLE (out_status text, out_first_seq bigint, out_created_at bigint)
        LANGUAGE plpgsql VOLATILE AS $fn$
        DECLARE
          v_n bigint := coalesce(cardinality(p_bodies), 0);
          v_now bigint := threadkeep_now_ms();
          v_last bigint;
          v_fence bigint;
        BEGIN
          IF p_fence IS NOT NULL THEN
            -- FOR SHARE makes a grant of a newer lease wait for this append, so no turn starts on a
            -- history that a stale holder is still writing to.
            SELECT l.fence INTO v_fence FROM leases l WHERE l.session_id = p_session FOR SHARE;
            IF v_fence > p_fence THEN
              RETURN QUERY SELECT 'lease_expired'::text, NULL::bigint, NULL::bigint;
              RETURN;
            END IF;
          END IF;
          UPDATE sessions s SET last_seq = s.last_seq + v_n, last_activity_at = v_now
            WHERE s.id = p_session RETURNING s.last_seq INTO v_last;
          IF NOT FOUND THEN
            RETURN QUERY SELECT 'not_found'::text, NULL::bigint, NULL::bigint;
            RETURN;
          END IF;
          -- Rows the cap would drop at once are never written. Only the first 100,000 characters are
          -- indexed for full text: a tsvector is capped at 1 MB.
          INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
            SELECT p_session, v_last - v_n + u.ord, v_now, u.body, u.txt,
                   to_tsvector(p_lang, left(u.txt, 100000))
            FROM unnest(p_bodies, p_texts) WITH ORDINALITY AS u(body, txt, ord)
            WHERE p_max IS NULL OR v_last - v_n + u.ord > v_last - p_max;
          IF p_max IS NOT NULL THEN
            DELETE FROM messages m WHERE m.session_id = p_session AND m.seq <= v_last - p_max;
          END IF;
          RETURN QUERY SELECT 'ok'::text, v_last - v_n + 1, v_now;
        END
        $fn$`;
    },
  },
  {
    version: 2,
    up: async (tx) => {
      // Appends to one session first queue on an advisory lock, which PostgreSQL grants strictly in
      // arrival order, then take the row lock uncontended. Without the queue, every waiter on the row
      // lock wakes when it frees and they race for it: under 50 concurrent writers on one session this
      // halved throughput and stretched p99 several-fold (docs/BENCHMARKS.md, PostgreSQL store).
      await tx`
        CREATE FUNCTION threadkeep_append_queued(
          p_session text, p_bodies text[], p_texts text[], p_max bigint, p_fence bigint, p_lang regconfig
        ) RETURNS TABLE (out_status text, out_first_seq bigint, out_created_at bigint)
        LANGUAGE plpgsql VOLATILE AS $fn$
        BEGIN
          PERFORM pg_advisory_xact_lock(hashtextextended(p_session, 0));
          RETURN QUERY SELECT * FROM threadkeep_append(p_session, p_bodies, p_texts, p_max, p_fence, p_lang);
        END
        $fn$`;
    },
  },
  {
    version: 3,
    up: async (tx) => {
      // Store-wide settings the data depends on, e.g. the text search configuration `tsv` was built
      // with: opening with another one rebuilds it (see useTextSearchConfig).
      await tx`CREATE TABLE threadkeep_settings (key text PRIMARY KEY, value text NOT NULL)`;
    },
  },
  { version: 4, up: (tx) => migrateHistory(tx) },
  { version: 5, up: (tx) => migrateVectors(tx) },
  {
    version: 6,
    up: async (tx) => {
      // Who a grant went to (a random token per waiter), so a waiter whose grant answer was lost in
      // an outage can give the lease back instead of leaving it to lapse.
      await tx`ALTER TABLE leases ADD COLUMN holder text`;
      await tx`ALTER TABLE lease_queue ADD COLUMN holder text`;
    },
  },
  { version: 7, up: (tx) => migrateTurnRead(tx) },
  { version: 8, up: (tx) => migrateTurnRelease(tx) },
  { version: 9, up: (tx) => migrateSummaryCap(tx) },
  { version: 10, up: (tx) => migrateHeldWrites(tx) },
  { version: 11, up: (tx) => migrateAppendCapGuard(tx) },
];

/** The newest schema version this code knows. */
export const SCHEMA_VERSION = MIGRATIONS.at(-1)!.version;

/**
 * Brings `schema` up to {@link SCHEMA_VERSION}. Concurrent starters serialise on an advisory lock held
 * for the migrating transaction, so exactly one applies each step and the others find it done.
 * @throws `schema_version_unsupported` when the database is newer than this code.
 */
export async function migrate(sql: PgSql, schema: string): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY}, hashtext(${schema}))`;
    const [exists] = await tx`SELECT 1 FROM pg_namespace WHERE nspname = ${schema}`;
    if (!exists) await tx`CREATE SCHEMA ${tx(schema)}`;
    await tx`CREATE TABLE IF NOT EXISTS threadkeep_migrations (version integer PRIMARY KEY, applied_at bigint NOT NULL)`;
    const [{ version }] =
      await tx`SELECT coalesce(max(version), 0)::integer AS version FROM threadkeep_migrations`;
    if (version > SCHEMA_VERSION) {
      throw new ThreadkeepError(
        "schema_version_unsupported",
        `PostgreSQL schema "${schema}" is at version ${version}; this threadkeep knows up to ${SCHEMA_VERSION}. Upgrade threadkeep.`,
      );
    }
    for (const migration of MIGRATIONS) {
      if (migration.version <= version) continue;
      await migration.up(tx);
      await tx`
        INSERT INTO threadkeep_migrations (version, applied_at)
        VALUES (${migration.version}, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)`;
    }
  });
}

/** A `messages` row as the store reads it. */
export interface MessageRow {
  seq: number;
  created_at: number;
  body: string;
}

/** A `sessions` row as the store reads it. */
export interface SessionRow {
  id: string;
  user_id: string;
  created_at: number;
  last_activity_at: number;
  metadata: string;
}

/** A `summaries` row as the store reads it. */
export interface SummaryRow {
  id: number;
  from_seq: number;
  to_seq: number;
  created_at: number;
  content: string;
  metadata: string | null;
}

/** The session of a row. */
export const toSession = (row: SessionRow): Session => ({
  id: row.id,
  userId: row.user_id,
  createdAt: row.created_at,
  lastActivityAt: row.last_activity_at,
  metadata: JSON.parse(row.metadata),
});

/** A fresh object per read; the body never holds seq or createdAt (see {@link bodyOf}). */
export function toMessage(row: MessageRow): Message {
  const message = JSON.parse(row.body) as Message;
  message.seq = row.seq;
  message.createdAt = row.created_at;
  return message;
}

/** The summary of a row. */
export const toSummary = (row: SummaryRow): Summary => ({
  id: row.id,
  fromSeq: row.from_seq,
  toSeq: row.to_seq,
  content: row.content,
  createdAt: row.created_at,
  ...(row.metadata === null ? {} : { metadata: JSON.parse(row.metadata) }),
});

/** The message as stored: its JSON without the store's bookkeeping. */
export function bodyOf(message: MessageInput): string {
  const { seq: _seq, createdAt: _createdAt, ...rest } = message as Partial<Message>;
  return JSON.stringify(rest);
}

/** Lower-cased as the other stores compare; U+0000 dropped because PostgreSQL text cannot hold it. */
export const searchable = (text: string) => text.toLowerCase().replaceAll("\u0000", "");

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

/** @throws `invalid_request` when `lang` is no text search configuration of the server. */
export async function checkTextSearchConfig(sql: PgSql, lang: string): Promise<void> {
  try {
    await sql`SELECT ${lang}::regconfig`;
  } catch (error) {
    if ((error as { code?: string }).code !== "42704") throw error;
    throw new ThreadkeepError("invalid_request", `Unknown PostgreSQL text search configuration "${lang}"`, {
      cause: error,
    });
  }
}

/**
 * Makes full-text search use `lang`: when the stored `tsv` columns were built with another
 * configuration (or an unknown one, from before the setting was recorded) they are rebuilt, once,
 * under a lock so concurrent starters do it once.
 * @throws `invalid_request` when `lang` is no text search configuration of the server.
 */
export async function useTextSearchConfig(sql: PgSql, lang: string, schema: string): Promise<void> {
  await checkTextSearchConfig(sql, lang);
  const current = async (q: PgSql | Tx) =>
    (await q<{ value: string }[]>`SELECT value FROM threadkeep_settings WHERE key = 'fts_language'`)[0]?.value;
  if ((await current(sql)) === lang) return;
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY + 1}, hashtext(${schema}))`;
    if ((await current(tx)) === lang) return;
    await tx`UPDATE messages SET tsv = to_tsvector(${lang}::regconfig, left(search_text, 100000))`;
    await tx`
      INSERT INTO threadkeep_settings (key, value) VALUES ('fts_language', ${lang})
      ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
  });
}

/** Node and driver error codes that mean the server could not be reached or the connection broke. */
const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "CONNECT_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
]);

/** Codes of a connection that was never made: nothing was sent on it. */
const UNSENT_CODES = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN", "CONNECT_TIMEOUT"]);

/**
 * SQLSTATE classes of a server that is there but cannot serve now: connection exceptions (08),
 * transaction rollbacks (40: serialization failure, deadlock), insufficient resources (53: too many
 * connections, disk full), operator intervention (57: statement timeout, shutting down, starting up)
 * and system errors (58: I/O).
 */
const OUTAGE_CLASSES = new Set(["08", "40", "53", "57", "58"]);
/** Single states of the same kind: a lock wait that ran out; a read-only server (a standby, or a primary being failed over). */
const OUTAGE_STATES = new Set(["55P03", "25006"]);

/**
 * True for an SQLSTATE the server answered with that is not about availability (a missing table or
 * column 42P01/42703, a permission 42501, an invalid schema 3F000, …): retrying will not help, the
 * database needs fixing. Driver codes (no SQLSTATE) are not refusals.
 */
function isRefusal(code: string): boolean {
  return /^[0-9A-Z]{5}$/.test(code) && !CONNECTION_CODES.has(code) && !OUTAGE_CLASSES.has(code.slice(0, 2)) && !OUTAGE_STATES.has(code);
}

/** True when `error` says the server could not be reached or the connection broke. */
export function isConnectionError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && CONNECTION_CODES.has(code);
}

/**
 * Turns a driver error into a coded {@link ThreadkeepError}, keeping it as `cause`. Constraint
 * violations get their own codes; everything else from underneath is `store_unavailable`, because a
 * store that failed is one to retry later, never an empty result. Errors thrown on purpose pass through.
 */
export function toStoreError(error: unknown, what: string): unknown {
  if (error instanceof ThreadkeepError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return error;
  if (code === "23505")
    return new ThreadkeepError("session_exists", `${what}: the session already exists`, { cause: error });
  if (code === "23503")
    return new ThreadkeepError("session_not_found", `${what}: no such session`, { cause: error });
  // Text with U+0000 or bytes the encoding cannot hold: the request, not the store, is at fault.
  if (code === "22021" || code === "22P05") {
    return new ThreadkeepError(
      "invalid_request",
      `${what}: text PostgreSQL cannot store (e.g. a NUL character)`,
      {
        cause: error,
      },
    );
  }
  const refused = isRefusal(code);
  const reason = CONNECTION_CODES.has(code)
    ? "the PostgreSQL server cannot be reached"
    : refused
      ? "PostgreSQL refused the statement"
      : "PostgreSQL failed";
  // The server's own words ("database \"x\" does not exist") say what to fix; the code alone does not.
  const said = (error as { message?: unknown }).message;
  const detail = typeof said === "string" && said ? `: ${said.slice(0, 200)}` : "";
  // A connection that broke with the statement on it leaves the statement's outcome unknown.
  const unknown = CONNECTION_CODES.has(code) && !UNSENT_CODES.has(code);
  const details = unknown ? { outcome: "unknown" } : refused ? { refused: true, sqlState: code } : undefined;
  return new ThreadkeepError("store_unavailable", `${what}: ${reason} (${code})${detail}`, {
    cause: error,
    ...(details ? { details } : {}),
  });
}
