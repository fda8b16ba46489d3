/**
 * Two `threadkeep serve` processes on one PostgreSQL (and one Redis): one is killed with SIGKILL in the
 * middle of a turn (held by a slow upstream). The other serves that session once the dead turn's lease
 * lapses: within one lease lifetime after the kill (plus a poll), never before the lease let go.
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { FullStore } from "../../src/core/types.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { createRedisStore } from "../../src/stores/redis/index.js";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";
import { serviceAvailable, TEST_POSTGRES_URL, TEST_REDIS_URL } from "../_services.js";
import { chatTurn as chat, killServeProcesses, startServe } from "./_serve-process.js";

/** Short, so the test is quick; the bound scales with it (10 s by default). */
const LEASE_TTL_MS = 3_000;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  killServeProcesses();
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** `threadkeep serve` on the store with a short lease; resolves once it listens. */
async function serve(store: string, upstream: FakeUpstream) {
  const run = startServe(["--store", store, "--lease-ttl", `${LEASE_TTL_MS}ms`], upstream);
  return { child: run.child, url: await run.listening };
}

const BACKENDS: { name: "postgres" | "redis"; url: string; open: () => FullStore }[] = [
  { name: "postgres", url: TEST_POSTGRES_URL, open: () => createPostgresStore({ url: TEST_POSTGRES_URL }) },
  { name: "redis", url: TEST_REDIS_URL, open: () => createRedisStore({ url: TEST_REDIS_URL }) },
];

describe.each(BACKENDS)("one of two serve instances killed mid-turn ($name)", { timeout: 60_000 }, (backend) => {
  it("the other serves the session within one lease lifetime, after the dead turn's lease let go", async (ctx) => {
    const available = await serviceAvailable(backend.name);
    if (available !== true) ctx.skip(available);
    const fake = await startFakeUpstream();
    cleanups.push(() => fake.close());
    fake.setReply((body) => {
      const content = body.messages.at(-1).content;
      return { content: `re: ${content}`, delayMs: content === "hold" ? 60_000 : 0 };
    });
    const [a, b] = await Promise.all([serve(backend.url, fake), serve(backend.url, fake)]);
    const session = randomUUID();
    expect((await chat(a.url, session, "warm")).status).toBe(200);

    // A holds the session's turn (the model is slow) when it dies.
    void chat(a.url, session, "hold").catch(() => {});
    const deadline = Date.now() + 10_000;
    while (!fake.chatRequests().some((r) => r.body.messages.at(-1).content === "hold")) {
      if (Date.now() > deadline) throw new Error("the held turn never reached the upstream");
      await new Promise((r) => setTimeout(r, 20));
    }
    // Past one heartbeat, so the test also shows a renewed lease lapses once its holder is gone.
    await new Promise((r) => setTimeout(r, LEASE_TTL_MS / 2));
    a.child.kill("SIGKILL");
    const killedAt = Date.now();

    const next = await chat(b.url, session, "next");
    const waited = Date.now() - killedAt;
    expect(next.status).toBe(200);
    expect(next.warning).toBeNull();
    // Not before the dead holder's lease lapsed (turn order holds), and within its lifetime + a poll.
    expect(waited).toBeGreaterThan(LEASE_TTL_MS / 3);
    expect(waited).toBeLessThan(LEASE_TTL_MS + 1_500);

    const store = backend.open();
    cleanups.push(() => store.close());
    expect((await store.getMessages(session)).map((m) => m.content)).toEqual(["warm", "re: warm", "next", "re: next"]);
  });
});
