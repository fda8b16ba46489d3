/**
 * A PostgreSQL database that refuses the turn lease statement — a leases table altered under
 * threadkeep, a role without rights on it — (and a SQLite file whose lease table was altered) is not an outage: the turn fails with 503
 * `store_misconfigured` before any model call, logged at error level with the SQL error and counted,
 * instead of running unordered as it does when the store cannot be reached. Fixing the database
 * brings turns back without a restart.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer as createTcpServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import postgres from "postgres";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { type Stack, startStack } from "./_stack.js";

const enabled = await serviceAvailable("postgres");
const schema = `tk_refused_${randomBytes(6).toString("hex")}`;
const role = `tk_refused_${randomBytes(6).toString("hex")}`;

/** Log lines of the server, parsed. */
function logSink() {
  const lines: { level: number; msg: string; err?: { message: string } }[] = [];
  return { lines, logger: { level: "info", stream: { write: (line: string) => lines.push(JSON.parse(line)) } } };
}

/** One chat turn on a new session. */
async function chat(stack: Stack) {
  const res = await stack.request("POST", "/v1/chat/completions", {
    headers: { "x-session-id": randomUUID() },
    body: { model: "fake", messages: [{ role: "user", content: "hello" }] },
  });
  return { status: res.status, warning: res.headers.get("x-threadkeep-warning"), body: (await res.json()) as any };
}

async function errorsCounted(stack: Stack, code: string): Promise<number> {
  const text = await (await stack.request("GET", "/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith(`threadkeep_errors_total{code="${code}"}`));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

describe.skipIf(enabled !== true)("a PostgreSQL database that refuses the turn lease", () => {
  let admin: postgres.Sql;
  let stack: Stack | undefined;

  beforeAll(async () => {
    admin = postgres(TEST_POSTGRES_URL, { onnotice: () => {}, max: 1 });
    // Migrate the schema once, as a running deployment would have it.
    const store = createPostgresStore({ url: TEST_POSTGRES_URL, schema });
    await store.getSession(randomUUID());
    await store.close();
  });
  afterEach(async () => {
    await stack?.close();
    stack = undefined;
  });
  afterAll(async () => {
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.unsafe(`DROP OWNED BY "${role}"`).catch(() => {});
    await admin.unsafe(`DROP ROLE IF EXISTS "${role}"`);
    await admin.end();
  });

  it("fails the turn with 503 store_misconfigured when a column of the leases table is gone, and recovers once it is back", async () => {
    await admin.unsafe(`ALTER TABLE "${schema}".leases RENAME COLUMN holder TO holder_gone`);
    try {
      const sink = logSink();
      stack = await startStack({ store: createPostgresStore({ url: TEST_POSTGRES_URL, schema }), logger: sink.logger });
      const refused = await chat(stack);
      expect(refused.status).toBe(503);
      expect(refused.body.error).toMatchObject({ code: "store_misconfigured", type: "server_error" });
      expect(refused.body.error.message).toContain("42703");
      expect(refused.body.error.message).toContain("holder");
      // No model call was paid for a turn that could not be ordered.
      expect(stack.fake.chatRequests()).toHaveLength(0);
      const logged = sink.lines.filter((l) => l.level >= 50);
      expect(logged.length).toBeGreaterThan(0);
      expect(logged.map((l) => JSON.stringify(l.err)).join("\n")).toContain("42703");
      expect(await errorsCounted(stack, "store_misconfigured")).toBe(1);
    } finally {
      await admin.unsafe(`ALTER TABLE "${schema}".leases RENAME COLUMN holder_gone TO holder`);
    }
    const fixed = await chat(stack);
    expect(fixed.status).toBe(200);
    expect(fixed.warning).toBeNull();
  });

  it("fails the turn with 503 store_misconfigured when the role may not write the leases table", async () => {
    await admin.unsafe(`CREATE ROLE "${role}" LOGIN`);
    await admin.unsafe(`GRANT USAGE ON SCHEMA "${schema}" TO "${role}"`);
    await admin.unsafe(`GRANT ALL ON ALL TABLES IN SCHEMA "${schema}" TO "${role}"`);
    await admin.unsafe(`GRANT ALL ON ALL SEQUENCES IN SCHEMA "${schema}" TO "${role}"`);
    await admin.unsafe(`REVOKE ALL ON "${schema}".leases FROM "${role}"`);
    const url = new URL(TEST_POSTGRES_URL);
    url.username = role;
    url.password = "";
    const sink = logSink();
    stack = await startStack({ store: createPostgresStore({ url: url.href, schema }), logger: sink.logger });
    const refused = await chat(stack);
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe("store_misconfigured");
    expect(refused.body.error.message).toContain("42501");
    expect(stack.fake.chatRequests()).toHaveLength(0);
    expect(sink.lines.some((l) => l.level >= 50 && JSON.stringify(l.err).includes("permission denied"))).toBe(true);
  });

  it("still runs the turn without the lease when the server cannot be reached (an outage)", async () => {
    // A port nobody listens on: connection refused.
    const closed = createTcpServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as { port: number }).port;
    await new Promise((resolve) => closed.close(resolve));
    const url = new URL(TEST_POSTGRES_URL);
    url.port = String(port);
    const sink = logSink();
    stack = await startStack({
      store: createPostgresStore({ url: url.href, schema, connectTimeoutSeconds: 1 }),
      logger: sink.logger,
    });
    const degraded = await chat(stack);
    expect(degraded.status).toBe(200);
    expect(degraded.warning).toContain("context-unavailable");
    expect(stack.fake.chatRequests()).toHaveLength(1);
    expect(sink.lines.some((l) => l.level === 40 && l.msg.includes("running the turn without it"))).toBe(true);
    expect(await errorsCounted(stack, "store_misconfigured")).toBe(0);
  });
});

describe("a SQLite file that refuses the turn lease (lease in the file)", () => {
  const dir = mkdtempSync(join(tmpdir(), "threadkeep-lease-refused-"));
  let stack: Stack | undefined;
  afterAll(async () => {
    await stack?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("fails the turn with 503 store_misconfigured when a column of turn_leases is gone, and recovers once it is back", async () => {
    const path = join(dir, "threadkeep.db");
    const sink = logSink();
    stack = await startStack({ store: createSqliteStore({ path, crossProcessLease: true }), logger: sink.logger });
    expect((await chat(stack)).status).toBe(200);
    const raw = new Database(path);
    raw.exec("ALTER TABLE turn_leases RENAME COLUMN expires_at TO expires_gone");
    try {
      const refused = await chat(stack);
      expect(refused.status).toBe(503);
      expect(refused.body.error).toMatchObject({ code: "store_misconfigured", type: "server_error" });
      expect(refused.body.error.message).toContain("SQLITE_ERROR");
      expect(stack.fake.chatRequests()).toHaveLength(1);
      expect(await errorsCounted(stack, "store_misconfigured")).toBe(1);
    } finally {
      raw.exec("ALTER TABLE turn_leases RENAME COLUMN expires_gone TO expires_at");
      raw.close();
    }
    const fixed = await chat(stack);
    expect(fixed.status).toBe(200);
    expect(fixed.warning).toBeNull();
  });
});
