/**
 * Counts what a PostgreSQL client sends, from the raw bytes of its connections (see the `tap` of
 * `_tcp-proxy.ts`): the frontend protocol's messages by type, so a test can tell how many statements
 * (Execute, or simple Query) and round trips (Sync, or simple Query) an operation cost. Statements
 * whose SQL matches `aside` (background work such as the store's search-index drain) are counted
 * apart, in {@link PgWireCounter.setAside}, with every message up to their Sync. `onStatement` sees
 * each statement's SQL with the connection it went to, so a test can tell which pool ran it.
 */
import type { Socket } from "node:net";

/** Frontend message types worth naming; any other type is counted under its letter. */
const NAMES: Record<string, string> = {
  Q: "query",
  P: "parse",
  B: "bind",
  E: "execute",
  S: "sync",
  D: "describe",
  C: "close",
  X: "terminate",
};

/** A running count of frontend messages over every connection fed to it. */
export interface PgWireCounter {
  /** Feed one chunk a client sent on `connection`. */
  feed: (connection: Socket, chunk: Buffer) => void;
  /** Messages seen since the last reset, by name (`execute`, `sync`, `query`, …). */
  counts(): Record<string, number>;
  /** Statements run since the last reset: extended-protocol Executes plus simple Queries. */
  statements(): number;
  /** Round trips since the last reset: extended-protocol Syncs plus simple Queries. */
  roundTrips(): number;
  /** Starts counting from zero. */
  reset(): void;
  /** When the last message was seen (performance.now()), to wait for a quiet connection. */
  lastSeenAt(): number;
  /** Statements since the last reset whose SQL matched `aside` (not in the other counts). */
  setAside(): number;
}

interface Stream {
  buffered: Buffer;
  /** The first message (startup or SSL request) has no type byte. */
  started: boolean;
  /** The SQL of the connection's prepared statements, by name. */
  prepared: Map<string, string>;
  /** Inside an extended query set aside (until its Sync). */
  aside: boolean;
  /** The SQL of the statement last bound (or parsed unnamed), for `onStatement`. */
  bound: string;
}

/** The NUL-terminated strings at the start of a message body. */
function cstrings(body: Buffer, n: number): string[] {
  const out: string[] = [];
  let at = 0;
  for (let i = 0; i < n; i++) {
    const end = body.indexOf(0, at);
    if (end < 0) break;
    out.push(body.toString("utf8", at, end));
    at = end + 1;
  }
  return out;
}

/** Parses each connection's byte stream into frontend messages and counts them. */
export function pgWireCounter(
  options: { aside?: RegExp; onStatement?: (connection: Socket, sql: string) => void } = {},
): PgWireCounter {
  const streams = new WeakMap<Socket, Stream>();
  let counts: Record<string, number> = {};
  let setAside = 0;
  let last = performance.now();
  const count = (type: string) => {
    const name = NAMES[type] ?? type;
    counts[name] = (counts[name] ?? 0) + 1;
    last = performance.now();
  };
  /** Whether the message of `type` with `body` on `stream` is set aside rather than counted. */
  const isAside = (stream: Stream, type: string, body: Buffer): boolean => {
    const aside = options.aside;
    if (!aside) return false;
    if (type === "Q") {
      if (!aside.test(cstrings(body, 1)[0] ?? "")) return false;
      setAside++;
      return true;
    }
    if (type === "P") {
      const [name, text] = cstrings(body, 2);
      stream.prepared.set(name, text);
      if (aside.test(text)) stream.aside = true;
    } else if (type === "B") {
      if (aside.test(stream.prepared.get(cstrings(body, 2)[1]) ?? "")) stream.aside = true;
    } else if (type === "E" && stream.aside) setAside++;
    const skipped = stream.aside;
    if (type === "S") stream.aside = false;
    return skipped;
  };
  /** Tells `onStatement` of a simple Query or an Execute, with its SQL. */
  const statementOf = (connection: Socket, stream: Stream, type: string, body: Buffer) => {
    if (type === "Q") options.onStatement!(connection, cstrings(body, 1)[0] ?? "");
    else if (type === "P") {
      const [name, text] = cstrings(body, 2);
      stream.prepared.set(name, text);
    } else if (type === "B") stream.bound = stream.prepared.get(cstrings(body, 2)[1]) ?? "";
    else if (type === "E") options.onStatement!(connection, stream.bound);
  };
  return {
    feed(connection, chunk) {
      let stream = streams.get(connection);
      if (!stream) {
        stream = { buffered: Buffer.alloc(0), started: false, prepared: new Map(), aside: false, bound: "" };
        streams.set(connection, stream);
      }
      let data = Buffer.concat([stream.buffered, chunk]);
      for (;;) {
        if (!stream.started) {
          if (data.length < 8) break;
          const length = data.readInt32BE(0);
          if (data.length < length) break;
          // An SSL or GSS request is answered with one byte; the startup message follows it untyped.
          const code = data.readInt32BE(4);
          if (code !== 80877103 && code !== 80877104) stream.started = true;
          data = data.subarray(length);
          continue;
        }
        if (data.length < 5) break;
        const length = data.readInt32BE(1);
        if (data.length < 1 + length) break;
        const type = String.fromCharCode(data[0]);
        if (options.onStatement) statementOf(connection, stream, type, data.subarray(5, 1 + length));
        if (isAside(stream, type, data.subarray(5, 1 + length))) last = performance.now();
        else count(type);
        data = data.subarray(1 + length);
      }
      stream.buffered = Buffer.from(data);
    },
    counts: () => ({ ...counts }),
    statements: () => (counts.execute ?? 0) + (counts.query ?? 0),
    roundTrips: () => (counts.sync ?? 0) + (counts.query ?? 0),
    reset() {
      counts = {};
      setAside = 0;
    },
    lastSeenAt: () => last,
    setAside: () => setAside,
  };
}
