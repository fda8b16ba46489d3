/**
 * The PostgreSQL driver (postgres.js) when a connection's backend dies under it. Up to 3.4.10 a query
 * sent on a reserved connection whose backend had just been terminated was written from a
 * `setImmediate` after the driver had dropped the socket, and the `TypeError` that threw ended the
 * process (porsager/postgres issues 1154 and 1208); the store reserves a connection for a vector index
 * build (`postgres/_hnsw.ts`), and any pooled connection could hit the same write. Since 4.x the
 * query is rejected. An uncaught exception fails this file's run.
 */
import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";

const available = await serviceAvailable("postgres");

describe("the PostgreSQL driver when a backend is terminated", () => {
  it("rejects the queries of a reserved connection whose backend died, and the process goes on", async (ctx) => {
    if (available !== true) return ctx.skip(available);
    const sql = postgres(TEST_POSTGRES_URL, { max: 2, onnotice: () => {} });
    const admin = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {} });
    try {
      const reserved = await sql.reserve();
      try {
        const [{ pid }] = await reserved<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
        await admin`SELECT pg_terminate_backend(${pid})`;
        const outcomes: string[] = [];
        for (let i = 0; i < 3; i++) {
          // On 3.4.x the query is never settled (the write that would send it threw): bounded, so
          // the test says so instead of running out its time.
          let timer: NodeJS.Timeout | undefined;
          outcomes.push(
            await Promise.race([
              reserved`SELECT 1`.then(
                () => "answered",
                (error: { code?: string }) => `rejected ${error.code}`,
              ),
              new Promise<string>((resolve) => {
                timer = setTimeout(() => resolve("no answer within 5 s"), 5_000);
              }),
            ]).finally(() => clearTimeout(timer)),
          );
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        // The first is refused by the dying backend (57P01, admin shutdown) or the closed socket; none is answered.
        expect(outcomes).toHaveLength(3);
        for (const outcome of outcomes) expect(outcome).toMatch(/^rejected (57P01|CONNECTION_CLOSED|ECONNRESET)$/);
      } finally {
        reserved.release();
      }
      // The pool itself still answers on a new connection.
      expect(await sql`SELECT 1 AS one`).toEqual([{ one: 1 }]);
    } finally {
      await Promise.all([sql.end({ timeout: 1 }), admin.end({ timeout: 1 })]);
    }
  });
});
