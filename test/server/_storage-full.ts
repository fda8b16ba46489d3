/**
 * What the server does on a store that refuses writes for want of space, the same whatever the store
 * (postgres-disk-full, redis-maxmemory): the turn is answered `not-saved` (never a 5xx), reads go on,
 * `/readyz` and `/metrics` show it, and once space returns the next turn is saved, with nothing else to
 * do and nothing of the refused turn stored. How the store is filled and freed is each test's own.
 */
import { randomUUID } from "node:crypto";
import { expect } from "vitest";
import { metricValue } from "./_error-helpers.js";
import { chatTurn } from "./_serve-process.js";
import type { Stack } from "./_stack.js";

/** How a test makes its store full and gives the space back. */
export interface FullStorage {
  /** Makes every write of the store fail for want of space. */
  fill(): Promise<unknown>;
  /** Gives the space back. */
  free(): Promise<unknown>;
  /** What `/readyz` says of the store's refusal (`storageFull.error`). */
  error: RegExp;
}

/** Two turns saved; the store fills; a turn is refused; space returns; the next turn is saved. */
export async function storageFullScenario(stack: Stack, storage: FullStorage): Promise<void> {
  const session = randomUUID();
  for (const text of ["one", "two"])
    expect(await chatTurn(stack.url, session, text)).toMatchObject({ status: 200, warning: null });

  await storage.fill();
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
  expect(await ready.json()).toMatchObject({
    status: "degraded",
    storageFull: { error: expect.stringMatching(storage.error) },
  });
  expect(await metricValue(stack, "threadkeep_store_full")).toBe(1);
  expect(await metricValue(stack, 'threadkeep_errors_total{code="storage_full"}')).toBe(1);
  // The session API reads too.
  expect((await stack.request("GET", `/v1/sessions/${session}/messages`)).status).toBe(200);

  // Space returns: the next turn (the session's lease given back after the refused write) is saved.
  await storage.free();
  expect(await chatTurn(stack.url, session, "four")).toMatchObject({ status: 200, warning: null });
  expect(await (await stack.request("GET", "/readyz")).json()).toMatchObject({ status: "ok" });
  expect(await metricValue(stack, "threadkeep_store_full")).toBe(0);
  const stored = await stack.memory.getMessages(session);
  expect(stored.map((m) => m.content)).toEqual(["one", "echo: one", "two", "echo: two", "four", "echo: four"]);
}
