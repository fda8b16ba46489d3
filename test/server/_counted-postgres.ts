/**
 * `threadkeep serve` on the test PostgreSQL through a TCP proxy that counts what it sends (`_pg-wire.ts`),
 * answered by a fake upstream: how the round-trip tests of a proxied turn count a turn on the wire. The
 * store's search-index drain (postgres/_indexing.ts) is counted apart: background work, not the turn's.
 */
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";
import { type PgWireCounter, pgWireCounter } from "../_pg-wire.js";
import { TEST_POSTGRES_URL } from "../_services.js";
import { startTcpProxy } from "../_tcp-proxy.js";
import { startServe } from "./_serve-process.js";

/** A counted `serve`: its URL, its upstream, and the count of what it sent PostgreSQL. */
export interface CountedServe {
  url: string;
  fake: FakeUpstream;
  counter: PgWireCounter;
}

/**
 * Starts the fake upstream, the counting proxy and `serve --store <proxy> …args`; what it starts is
 * closed by the functions it adds to `cleanups` (the serve child by `killServeProcesses`).
 */
export async function startCountedServe(args: string[], cleanups: (() => Promise<unknown>)[]): Promise<CountedServe> {
  const fake = await startFakeUpstream();
  cleanups.push(() => fake.close());
  const counter = pgWireCounter({ aside: /threadkeep_index_pending/ });
  const target = new URL(TEST_POSTGRES_URL);
  const proxy = await startTcpProxy(
    { host: target.hostname, port: Number(target.port || 5432) },
    { tap: counter.feed },
  );
  cleanups.push(() => proxy.close());
  const url = await startServe(["--store", proxy.url(TEST_POSTGRES_URL), ...args], fake).listening;
  return { url, fake, counter };
}

/** Waits until nothing was sent to PostgreSQL for `ms` (background work after a reply included). */
export async function quiet(counter: PgWireCounter, ms = 500): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (performance.now() - counter.lastSeenAt() < ms) {
    if (Date.now() > deadline) throw new Error("PostgreSQL traffic never stopped");
    await new Promise((r) => setTimeout(r, 50));
  }
}
