/**
 * Counts what a PostgreSQL client sends, from the raw bytes of its connections (see the `tap` of
 * `_tcp-proxy.ts`): the frontend protocol's messages by type, so a test can tell how many statements
 * (Execute, or simple Query) and round trips (Sync, or simple Query) an operation cost.
 */
import type { Socket } from "node:net";

/** Frontend message types worth naming; any other type is counted under its letter. */
const NAMES: Record<string, string> = { Q: "query", P: "parse", B: "bind", E: "execute", S: "sync", D: "describe", C: "close", X: "terminate" };

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
}

interface Stream {
  buffered: Buffer;
  /** The first message (startup or SSL request) has no type byte. */
  started: boolean;
}

/** Parses each connection's byte stream into frontend messages and counts them. */
export function pgWireCounter(): PgWireCounter {
  const streams = new WeakMap<Socket, Stream>();
  let counts: Record<string, number> = {};
  let last = performance.now();
  const count = (type: string) => {
    const name = NAMES[type] ?? type;
    counts[name] = (counts[name] ?? 0) + 1;
    last = performance.now();
  };
  return {
    feed(connection, chunk) {
      let stream = streams.get(connection);
      if (!stream) {
        stream = { buffered: Buffer.alloc(0), started: false };
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
        count(String.fromCharCode(data[0]));
        data = data.subarray(1 + length);
      }
      stream.buffered = Buffer.from(data);
    },
    counts: () => ({ ...counts }),
    statements: () => (counts.execute ?? 0) + (counts.query ?? 0),
    roundTrips: () => (counts.sync ?? 0) + (counts.query ?? 0),
    reset() {
      counts = {};
    },
    lastSeenAt: () => last,
  };
}
