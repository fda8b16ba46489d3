/**
 * A turn's grant on PostgreSQL commits without waiting for the WAL flush (its write's flush covers
 * it), so a database crash can lose it and hand its fence to the next waiter. These tests play the
 * crash by putting the lease row and the fence sequence back as they were before the grant, and check
 * that the holder whose grant was lost cannot write, while the next holder, given the same fence
 * number, can: writes are fenced by fence and holder together (`src/stores/postgres/migrations/010-held-writes.ts`).
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { expectCode } from "../../src/testing/index.js";
import { serviceAvailable } from "../_services.js";
import { postgresStoresInSchema } from "./_postgres-stores.js";

const enabled = await serviceAvailable("postgres");
const say = (content: string) => ({ role: "user" as const, content });
const opening = (userId: string) => ({ owner: { userId }, last: 20, lease: { ttlMs: 10_000, waitMs: 2_000 } });

describe.runIf(enabled === true)("postgres: a turn's grant lost in a crash", () => {
  const { admin, store, other } = postgresStoresInSchema();

  /** A session with one message and one finished turn, so its lease row has a state to go back to. */
  const setup = async () => {
    const owner = `owner-${randomUUID()}`;
    const { id } = await store.createSession({ id: newSessionId(), userId: owner });
    const first = await store.openTurn!(id, opening(owner));
    await store.appendMessages(id, [say("m1")], { fence: first.lease.fence, releaseLease: true });
    return { owner, id };
  };

  type LeaseRow = { fence: number; expires_at: number; holder: string };
  const leaseRow = async (id: string) =>
    (
      await admin<
        LeaseRow[]
      >`SELECT fence::int, expires_at::float8 AS expires_at, holder FROM leases WHERE session_id = ${id}`
    )[0];

  /** What a crash before the grant's commit was flushed leaves: the row and the sequence as before. */
  const loseGrant = async (id: string, before: LeaseRow, fence: number) => {
    await admin`UPDATE leases SET fence = ${before.fence}, expires_at = ${before.expires_at}, holder = ${before.holder} WHERE session_id = ${id}`;
    await admin`SELECT setval('lease_fence', ${fence - 1})`;
  };

  /** Every fenced write of the store, each expected to be refused for `fence`. */
  const refusesEveryWrite = async (id: string, fence: number) => {
    await expectCode(store.appendMessages(id, [say("lost")], { fence }), "lease_expired");
    await expectCode(store.appendMessages(id, [say("lost")], { fence, releaseLease: true }), "lease_expired");
    await expectCode(store.appendMessages(id, [say("lost")], { fence, operationId: randomUUID() }), "lease_expired");
    await expectCode(store.replaceAfter(id, 1, [say("lost")], { fence }), "lease_expired");
    await expectCode(store.switchBranch(id, 1, { fence }), "lease_expired");
  };

  it("refuses a write with the holder's fence whose lease row names another holder", async () => {
    const { owner, id } = await setup();
    const turn = await store.openTurn!(id, opening(owner));
    // The same fence, granted to someone else (as after a crash that lost this grant).
    await admin`UPDATE leases SET holder = ${`someone-${randomUUID()}`} WHERE session_id = ${id}`;
    await refusesEveryWrite(id, turn.lease.fence);
    expect(await turn.lease.renew(10_000)).toBe(false);
    expect((await store.getMessages(id)).map((m) => m.content)).toEqual(["m1"]);
  });

  it("fails the writes of a holder whose grant was lost; the next holder, given the same fence, writes", async () => {
    const { owner, id } = await setup();
    const before = await leaseRow(id);
    const lost = await store.openTurn!(id, opening(owner));
    await loseGrant(id, before, lost.lease.fence);
    // The row holds the turn before: nobody holds the session, and the holder's grant is not there.
    await refusesEveryWrite(id, lost.lease.fence);

    const next = await other.openTurn!(id, opening(owner));
    expect(next.lease.fence).toBe(lost.lease.fence);
    expect(next.messages.map((m) => m.content)).toEqual(["m1"]);
    // Now the row holds the fence again, for another holder.
    await refusesEveryWrite(id, lost.lease.fence);
    expect(await lost.lease.renew(10_000)).toBe(false);
    await lost.lease.release();
    await expectCode(store.acquireLease(id, { waitMs: 50 }), "session_busy");

    await other.appendMessages(id, [say("q"), { role: "assistant", content: "a" }], {
      fence: next.lease.fence,
      owner: { userId: owner },
      releaseLease: true,
    });
    expect((await store.getMessages(id)).map((m) => m.content)).toEqual(["m1", "q", "a"]);
    await (await store.acquireLease(id, { waitMs: 1_000 })).release();
  });

  it("gives the next holder in the same store a fresh fence, so the two are told apart", async () => {
    const { owner, id } = await setup();
    const before = await leaseRow(id);
    const lost = await store.openTurn!(id, opening(owner));
    await loseGrant(id, before, lost.lease.fence);
    const next = await store.openTurn!(id, opening(owner));
    expect(next.lease.fence).toBeGreaterThan(lost.lease.fence);
    await refusesEveryWrite(id, lost.lease.fence);
    await store.appendMessages(id, [say("q")], { fence: next.lease.fence, releaseLease: true });
    await lost.lease.release();
    expect((await store.getMessages(id)).map((m) => m.content)).toEqual(["m1", "q"]);
    await (await store.acquireLease(id, { waitMs: 1_000 })).release();
  });

  it("checks a fence this store did not grant by number, as before (a durable acquireLease grant)", async () => {
    const { id } = await setup();
    const held = await other.acquireLease(id, { ttlMs: 10_000 });
    await store.appendMessages(id, [say("from the holder, through another store")], { fence: held.fence });
    await expectCode(store.appendMessages(id, [say("stale")], { fence: held.fence - 1 }), "lease_expired");
    await held.release();
    expect((await store.getMessages(id)).map((m) => m.content)).toEqual([
      "m1",
      "from the holder, through another store",
    ]);
  });
});
