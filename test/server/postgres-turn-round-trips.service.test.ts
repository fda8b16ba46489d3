/**
 * What one proxied turn costs PostgreSQL, counted on the wire: `threadkeep serve` with its default
 * settings (summaries on, compacting in the background) talks to PostgreSQL through a TCP proxy that
 * parses the frontend protocol, and a thin client's chat turn on an existing session is counted from
 * the request until the connections fall quiet (so background work after the reply counts too).
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { quiet, startCountedServe } from "./_counted-postgres.js";
import { chatTurn as chat, killServeProcesses } from "./_serve-process.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  killServeProcesses();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** `serve` settings a turn is counted under. */
const SETTINGS = [
  { name: "default settings (summaries on, compacting in the background)", args: [] },
  { name: "without summaries (--no-summaries)", args: ["--no-summaries"] },
];

describe.each(SETTINGS)("PostgreSQL round trips of a proxied turn, $name", { timeout: 60_000 }, ({ args }) => {
  it("a thin client's chat turn on an existing session is two statements: open the turn, commit it", async (ctx) => {
    const available = await serviceAvailable("postgres");
    if (available !== true) ctx.skip(available);
    const { url, counter } = await startCountedServe(args, cleanups);

    const session = randomUUID();
    // Warm-up: the session exists, and the connections have prepared their statements.
    for (let i = 0; i < 4; i++) expect((await chat(url, session, `warm ${i}`)).status).toBe(200);
    await quiet(counter);
    counter.reset();
    const turn = await chat(url, session, "counted");
    await quiet(counter);
    const counts = counter.counts();

    expect(turn.status).toBe(200);
    expect(turn.warning).toBeNull();
    expect(counter.statements(), `frontend messages: ${JSON.stringify(counts)}`).toBe(2);
    // Prepared on their connections already: one Sync each, so each statement is one round trip.
    expect(counts.sync, `frontend messages: ${JSON.stringify(counts)}`).toBe(2);
    // At most one drain statement indexes the turn's two messages (and any left from the warm-up).
    expect(counter.setAside()).toBeLessThanOrEqual(1);

    const store = createPostgresStore({ url: TEST_POSTGRES_URL });
    cleanups.push(() => store.close());
    const stored = await store.getMessages(session, { last: 2 });
    expect(stored.map((m) => [m.role, m.content])).toEqual([
      ["user", "counted"],
      ["assistant", expect.any(String)],
    ]);
    // The commit gave the lease back: the next turn is not kept waiting for it to lapse.
    const next = await store.acquireLease(session, { waitMs: 1_000 });
    await next.release();
  });
});
