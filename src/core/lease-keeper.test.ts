import { describe, expect, it } from "vitest";
import { createMemoryStore } from "../stores/in-process/index.js";
import { ThreadkeepError } from "./errors.js";
import { keepLease } from "./lease-keeper.js";
import type { Lease } from "./types.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A lease whose store is "down" while `down.value` is true: renew and release fail as an outage would. */
function flaky(lease: Lease, down: { value: boolean }, calls: string[]): Lease {
  const outage = () => new ThreadkeepError("store_unavailable", "store is down");
  return {
    sessionId: lease.sessionId,
    fence: lease.fence,
    get expiresAt() {
      return lease.expiresAt;
    },
    async renew(ttlMs) {
      calls.push(down.value ? "renew-failed" : "renew");
      if (down.value) throw outage();
      return lease.renew(ttlMs);
    },
    async release() {
      calls.push(down.value ? "release-failed" : "release");
      if (down.value) throw outage();
      return lease.release();
    },
  };
}

async function setup() {
  const store = createMemoryStore({ ttlMs: 0 });
  const session = await store.createSession({ id: crypto.randomUUID(), userId: "u" });
  return { store, id: session.id };
}

describe("keepLease", () => {
  it("keeps a short lease for a turn many times its lifetime", async () => {
    const { store, id } = await setup();
    const kept = keepLease(await store.acquireLease(id, { ttlMs: 150 }), { ttlMs: 150, warn: () => {} });
    await sleep(600);
    await expect(store.acquireLease(id, { waitMs: 30 })).rejects.toMatchObject({ code: "session_busy" });
    expect(kept.lost).toBe(false);
    await kept.release();
    await (await store.acquireLease(id, { waitMs: 100 })).release();
    await store.close();
  });

  it("rides out a store outage shorter than the lifetime and keeps beating after it", async () => {
    const { store, id } = await setup();
    const down = { value: false };
    const calls: string[] = [];
    const warnings: string[] = [];
    const lease = flaky(await store.acquireLease(id, { ttlMs: 300 }), down, calls);
    const kept = keepLease(lease, { ttlMs: 300, warn: (m) => warnings.push(m) });
    await sleep(120);
    down.value = true;
    await sleep(150);
    down.value = false;
    await sleep(400);
    expect(calls).toContain("renew-failed");
    expect(calls.at(-1)).toBe("renew");
    expect(warnings).toHaveLength(1);
    await expect(store.acquireLease(id, { waitMs: 30 })).rejects.toMatchObject({ code: "session_busy" });
    await kept.release();
    await store.close();
  });

  it("retries a release the store missed as soon as it answers again", async () => {
    const { store, id } = await setup();
    const down = { value: false };
    const calls: string[] = [];
    const lease = flaky(await store.acquireLease(id, { ttlMs: 5_000 }), down, calls);
    const kept = keepLease(lease, { ttlMs: 5_000, warn: () => {} });
    down.value = true;
    await kept.release();
    expect(calls).toEqual(["release-failed"]);
    const waiting = store.acquireLease(id, { waitMs: 3_000 });
    await sleep(300);
    down.value = false;
    const started = Date.now();
    const next = await waiting;
    // Within one retry interval of the store's return, far inside the 5 s lifetime.
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(calls.filter((c) => c === "release")).toHaveLength(1);
    await next.release();
    await store.close();
  });

  it("stops beating and reports a lease that another holder took over", async () => {
    const { store, id } = await setup();
    const warnings: string[] = [];
    const lease = await store.acquireLease(id, { ttlMs: 100 });
    // Beats far apart: the lease lapses between them and the next turn takes it.
    const kept = keepLease(lease, { ttlMs: 100, intervalMs: 300, warn: (m) => warnings.push(m) });
    const next = await store.acquireLease(id, { waitMs: 1_000, ttlMs: 5_000 });
    await sleep(400);
    expect(kept.lost).toBe(true);
    expect(warnings.join()).toMatch(/taken over/);
    await kept.release();
    await expect(store.acquireLease(id, { waitMs: 30 })).rejects.toMatchObject({ code: "session_busy" });
    await next.release();
    await store.close();
  });
});
