/**
 * Hand-written raw-driver baselines doing what a turn's two store calls do (read the last 20
 * messages, append one), with no ownership, cap, expiry or fencing: the floor a store is compared to.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { elapsedMs } from "./_harness.js";
import { type Scale, type Subject, totalMessages } from "./_store-bench.js";
import { messageOf, sessionIdOf } from "./_store-data.js";

/** A baseline: load the scale's data (after the store was loaded, when it reads the store's own data), measure, close. */
export interface RawBaseline {
  subject: Subject;
  /** The same baseline whose read also parses the JSON it reads, as a reader of those rows must; measured beside it. */
  parsed?: Subject;
  load(scale: Scale): Promise<void> | void;
  close(): Promise<void> | void;
}

/** SQLite: one plain table, one prepared statement per operation, no store code; `parsed` also parses what it reads. */
export function openSqliteRaw(_scale: Scale, dir: string): RawBaseline {
  mkdirSync(dir, { recursive: true });
  const db = new Database(join(dir, "raw.db"));
  // The same connection settings as the SQLite store, so the ratio measures the store's own work.
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.exec("CREATE TABLE messages (session_id TEXT, seq INTEGER, body TEXT, PRIMARY KEY (session_id, seq))");
  const insert = db.prepare("INSERT INTO messages (session_id, seq, body) VALUES (?, ?, ?)");
  const last = db.prepare("SELECT seq, body FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 20");
  const nextSeq = new Map<string, number>();
  let loaded: Scale | undefined;
  const append1 = (id: string, message: unknown) => {
    const seq = nextSeq.get(id) ?? (loaded?.messagesPerSession ?? 0) + 1;
    nextSeq.set(id, seq + 1);
    insert.run(id, seq, JSON.stringify(message));
  };
  return {
    subject: { name: "raw better-sqlite3", last20: (id) => last.all(id), append1 },
    parsed: {
      name: "raw better-sqlite3 + JSON.parse",
      last20: (id) =>
        (last.all(id) as { seq: number; body: string }[]).map((row) => {
          const message = JSON.parse(row.body);
          message.seq = row.seq;
          return message as unknown;
        }),
      append1,
    },
    load: (scale) => {
      loaded = scale;
      const started = performance.now();
      const loadSession = db.transaction((s: number) => {
        for (let m = 0; m < scale.messagesPerSession; m++)
          insert.run(sessionIdOf(s), m + 1, JSON.stringify(messageOf(s, m)));
      });
      for (let s = 0; s < scale.sessions; s++) loadSession(s);
      console.log(`  raw: loaded ${totalMessages(scale).toLocaleString("en")} messages in ${elapsedMs(started)}`);
    },
    close: () => {
      db.close();
    },
  };
}

/**
 * PostgreSQL: reads the store's own `messages` table of `schema` (one prepared `SELECT … LIMIT 20`;
 * `parsed` also parses each body and sets its seq, as a reader of those rows must, like SQLite's)
 * and appends with a plain INSERT into a table of its own. Both prepare their statements, as the
 * store does (the driver's default). Dropping `schema` on close.
 * @returns a reason when the server is unreachable.
 */
export async function openPostgresRaw(url: string, schema: string, pool: number): Promise<RawBaseline | string> {
  const { default: postgres } = await import("postgres");
  const raw = postgres(url, { max: pool, onnotice: () => {}, connect_timeout: 3, connection: { search_path: schema } });
  try {
    await raw`SELECT 1`;
  } catch (error) {
    await raw.end({ timeout: 1 });
    return `${url.replace(/\/\/[^@]*@/, "//")} is not reachable (${(error as Error).message})`;
  }
  const nextSeq = new Map<string, number>();
  const subject: Subject = {
    name: "raw postgres.js (SELECT … LIMIT 20; INSERT)",
    last20: (id) => raw`SELECT body FROM messages WHERE session_id = ${id} ORDER BY seq DESC LIMIT 20`,
    append1: (id, message) => {
      const seq = nextSeq.get(id) ?? 1;
      nextSeq.set(id, seq + 1);
      return raw`INSERT INTO raw_messages (session_id, seq, body) VALUES (${id}, ${seq}, ${JSON.stringify(message)})`;
    },
  };
  return {
    subject,
    parsed: {
      name: "raw postgres.js + JSON.parse",
      last20: async (id) =>
        (
          await raw<
            { seq: string; body: string }[]
          >`SELECT seq, body FROM messages WHERE session_id = ${id} ORDER BY seq DESC LIMIT 20`
        ).map((row) => {
          const message = JSON.parse(row.body);
          message.seq = Number(row.seq);
          return message as unknown;
        }),
      append1: subject.append1,
    },
    load: async (scale) => {
      await raw`VACUUM ANALYZE messages`;
      await raw`VACUUM ANALYZE sessions`;
      await raw`CREATE TABLE raw_messages (session_id text, seq bigint, body text, PRIMARY KEY (session_id, seq))`;
      // Every pooled connection opened and its statements prepared before anything is timed.
      await Promise.all(Array.from({ length: pool * 2 }, (_, k) => subject.last20(sessionIdOf(k % scale.sessions))));
    },
    close: async () => {
      await raw`DROP SCHEMA IF EXISTS ${raw(schema)} CASCADE`;
      await raw.end();
    },
  };
}

/**
 * Redis: one plain list per session holding the same JSON messages, `LRANGE key -20 -1` (each item
 * parsed, as a reader of such a list must) and `RPUSH`, over the same client package and protocol (RESP2) as the store. Removes every key under `prefix` on close.
 * @returns a reason when the server is unreachable.
 */
export async function openRedisRaw(url: string, prefix: string): Promise<RawBaseline | string> {
  const { createClient } = await import("redis");
  const raw = createClient({ url, RESP: 2, socket: { reconnectStrategy: false, connectTimeout: 2000 } });
  raw.on("error", () => {});
  try {
    await raw.connect();
  } catch (error) {
    return `${url} is not reachable (${(error as Error).message})`;
  }
  const key = (id: string) => `${prefix}raw:${id}`;
  return {
    subject: {
      name: "raw node-redis (LRANGE -20 -1 + JSON.parse; RPUSH)",
      // Parsed, as a user of a plain list must before using what it read: the store returns objects.
      last20: async (id) => (await raw.lRange(key(id), -20, -1)).map((item) => JSON.parse(item) as unknown),
      append1: (id, message) => raw.rPush(key(id), JSON.stringify(message)),
    },
    load: async (scale) => {
      const started = performance.now();
      let next = 0;
      const worker = async () => {
        for (let s = next++; s < scale.sessions; s = next++) {
          await raw.rPush(
            key(sessionIdOf(s)),
            Array.from({ length: scale.messagesPerSession }, (_, m) => JSON.stringify(messageOf(s, m))),
          );
        }
      };
      await Promise.all(Array.from({ length: 32 }, worker));
      console.log(`  raw: loaded ${totalMessages(scale).toLocaleString("en")} messages in ${elapsedMs(started)}`);
    },
    close: async () => {
      for await (const keys of raw.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 })) {
        if (keys.length > 0) await raw.unlink(keys);
      }
      await raw.close();
    },
  };
}
