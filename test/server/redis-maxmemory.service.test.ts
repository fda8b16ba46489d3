/**
 * The server on a Redis at its `maxmemory` with `noeviction` (a `redis-server` of the test's own,
 * filled with other data until it refuses writes with OOM): turns are answered `not-saved` (never a
 * 5xx), reads go on, `/readyz` and `/metrics` show it, and turns are saved again as soon as memory
 * frees (the limit is raised with CONFIG SET), with nothing half-written.
 */
import { createClient } from "redis";
import { afterEach, describe, expect, it } from "vitest";
import { redisServerAvailable, startRedisServers } from "../_redis-server.js";
import { startStack } from "./_stack.js";
import { storageFullScenario } from "./_storage-full.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe("serve on a Redis at its maxmemory (noeviction)", () => {
  it(
    "answers not-saved, keeps reading, shows it in /readyz and /metrics, and saves again once memory frees",
    { timeout: 30_000 },
    async (ctx) => {
      const available = redisServerAvailable("the Redis maxmemory test");
      if (available !== true) ctx.skip(available);
      const servers = await startRedisServers(
        1,
        () => ["--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"],
        {
          // A range of this test's own (see test/_ports.ts).
          range: [17_200, 17_299],
        },
      );
      cleanups.push(() => servers.stop());
      const redisUrl = `redis://127.0.0.1:${servers.ports[0]}`;
      const admin = createClient({ url: redisUrl });
      await admin.connect();
      cleanups.push(() => admin.close());

      const stack = await startStack({ store: redisUrl });
      cleanups.push(() => stack.close());
      await storageFullScenario(stack, {
        async fill() {
          // Other data fills the server up to a limit just above what it holds now, until it refuses writes.
          const used = Number(/used_memory:(\d+)/.exec(await admin.info("memory"))![1]);
          await admin.configSet("maxmemory", String(used + 1024 * 1024));
          const filler = "f".repeat(64 * 1024);
          let refusal: unknown;
          for (let i = 0; i < 1000 && !refusal; i++)
            await admin.set(`filler:${i}`, filler).catch((error) => (refusal = error));
          expect(String(refusal)).toMatch(/OOM command not allowed/);
          // Redis refuses a write only while it holds more than maxmemory: freed buffers can bring it back
          // under by a few bytes, and a small write slips in. Other data still growing keeps it over.
          const full = Number(/used_memory:(\d+)/.exec(await admin.info("memory"))![1]);
          await admin.configSet("maxmemory", String(full - 256 * 1024));
        },
        // The operator raises the limit.
        free: () => admin.configSet("maxmemory", "0"),
        error: /out of memory: OOM/,
      });
    },
  );
});
