/**
 * The server on a Redis at its `maxmemory` with `noeviction` (a `redis-server` of the test's own,
 * filled with other data until it refuses writes with OOM): turns are answered `not-saved` (never a
 * 5xx), reads go on, `/readyz` and `/metrics` show it, and turns are saved again as soon as memory
 * frees (the limit is raised with CONFIG SET), with nothing half-written.
 */
import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import { afterEach, describe, expect, it } from "vitest";
import { redisServerAvailable, startRedisServers } from "../_redis-server.js";
import { metricValue } from "./_error-helpers.js";
import { chatTurn } from "./_serve-process.js";
import { startStack } from "./_stack.js";

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
      const session = randomUUID();
      for (const text of ["one", "two"])
        expect(await chatTurn(stack.url, session, text)).toMatchObject({ status: 200, warning: null });

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

      const refused = await chatTurn(stack.url, session, "three");
      expect(refused).toMatchObject({ status: 200, warning: "not-saved" });
      expect(JSON.parse(refused.body).choices[0].message.content).toBe("echo: three");
      // Reads go on: that turn had the saved history.
      expect(
        stack.fake
          .chatRequests()
          .at(-1)!
          .body.messages.map((m: { content: string }) => m.content),
      ).toEqual(["one", "echo: one", "two", "echo: two", "three"]);
      const ready = await stack.request("GET", "/readyz");
      expect(ready.status).toBe(200);
      const body = (await ready.json()) as { status: string; storageFull?: { error: string } };
      expect(body.status).toBe("degraded");
      expect(body.storageFull?.error).toMatch(/out of memory: OOM/);
      expect(await metricValue(stack, "threadkeep_store_full")).toBe(1);
      expect(await metricValue(stack, 'threadkeep_errors_total{code="storage_full"}')).toBe(1);
      // The session API reads too.
      const listed = await stack.request("GET", `/v1/sessions/${session}/messages`);
      expect(listed.status).toBe(200);

      // Memory frees (the operator raises the limit): the next turn is saved, with nothing else to do.
      await admin.configSet("maxmemory", "0");
      expect(await chatTurn(stack.url, session, "four")).toMatchObject({ status: 200, warning: null });
      expect((await (await stack.request("GET", "/readyz")).json()) as object).toMatchObject({ status: "ok" });
      expect(await metricValue(stack, "threadkeep_store_full")).toBe(0);
      const stored = await stack.memory.getMessages(session);
      expect(stored.map((m) => m.content)).toEqual(["one", "echo: one", "two", "echo: two", "four", "echo: four"]);
    },
  );
});
