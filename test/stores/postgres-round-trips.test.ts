/**
 * Round trips of the PostgreSQL store's owner-scoped calls, counted on the wire: a TCP proxy on
 * 127.0.0.1 reads the protocol messages the client sends and counts the statements (each extended
 * query ends with a Sync, a simple query is one Query message). An owner-scoped append, plain or
 * idempotent, is one statement; so is an owner-scoped read.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { createConnection, createServer, type Server } from "node:net";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { SessionStore } from "../../src/core/types.js";
import { createPostgresStore } from "../../src/stores/postgres.js";
import { expectCode } from "../../src/testing/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";

const enabled = await serviceAvailable("postgres");
const schema = `tk_trips_${randomBytes(6).toString("hex")}`;

/** A proxy that counts the statements clients send through it. */
async function statementCounter(target: URL): Promise<{ url: string; statements: () => number; close: () => Promise<void> }> {
  let statements = 0;
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: target.hostname, port: Number(target.port || 5432) });
    let buffered = Buffer.alloc(0);
    let started = false;
    client.on("data", (chunk: Buffer) => {
      upstream.write(chunk);
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        // The startup message has no type byte: a length, then the protocol version.
        const header = started ? 5 : 4;
        if (buffered.length < header) break;
        const length = started ? buffered.readInt32BE(1) + 1 : buffered.readInt32BE(0);
        if (buffered.length < length) break;
        const type = started ? String.fromCharCode(buffered[0]) : "";
        if (type === "S" || type === "Q") statements++;
        buffered = buffered.subarray(length);
        started = true;
      }
    });
    upstream.on("data", (chunk) => client.write(chunk));
    for (const [a, b] of [[client, upstream], [upstream, client]] as const) {
      a.on("error", () => b.destroy());
      a.on("close", () => b.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = new URL(target.href);
  url.hostname = "127.0.0.1";
  url.port = String((server.address() as { port: number }).port);
  return {
    url: url.href,
    statements: () => statements,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe.skipIf(enabled !== true)("PostgreSQL owner-scoped calls on the wire", () => {
  let counter: Awaited<ReturnType<typeof statementCounter>>;
  let store: SessionStore;
  beforeAll(async () => {
    counter = await statementCounter(new URL(TEST_POSTGRES_URL));
    // One connection, so no statement can hide on another that was opened before counting.
    store = createPostgresStore({ url: counter.url, schema, poolSize: 1 });
  });
  afterAll(async () => {
    await store?.close();
    await counter?.close();
    const sql = postgres(TEST_POSTGRES_URL, { onnotice: () => {} });
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await sql.end();
  });

  /** Statements `fn` sends, measured on its second run (the first prepares the statements). */
  async function statementsOf(fn: (n: number) => Promise<unknown>): Promise<number> {
    await fn(0);
    const before = counter.statements();
    await fn(1);
    return counter.statements() - before;
  }

  it("appends for the owner in one statement, idempotent or not, and refuses another owner's in one", async () => {
    const userId = `owner-${randomUUID()}`;
    const { id } = await store.createSession({ id: newSessionId(), userId });
    const owner = { userId, activeSince: Date.now() - 60_000 };
    const message = (n: number) => [{ role: "user" as const, content: `m${n}` }];
    expect(await statementsOf((n) => store.appendMessages(id, message(n), { owner }))).toBe(1);
    expect(await statementsOf((n) => store.appendMessages(id, message(n), { owner, operationId: `op-${randomUUID()}` }))).toBe(1);
    expect(await statementsOf(() => store.getMessages(id, { last: 20, owner }))).toBe(1);
    const stranger = { userId: `stranger-${randomUUID()}` };
    expect(
      await statementsOf((n) => expectCode(store.appendMessages(id, message(n), { owner: stranger, operationId: `op-${n}` }), "session_not_found")),
    ).toBe(1);
    expect(await store.countMessages(id)).toBe(4);
  });
});
