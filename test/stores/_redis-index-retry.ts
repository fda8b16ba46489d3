/**
 * The background retry of a failed Redis index update, against writes of another process that land
 * in between (shared by the single-Redis and the Cluster tests). Store `a` writes three sessions while
 * the owner's index refuses writes, so each update is left to its retry: `fresh` and `doomed` are
 * created, `rewound` (created before) is touched to a time in the past. Once the index takes writes
 * again, store `b` (another process) appends to `fresh` and deletes `doomed`, each updating the
 * indexes itself, before `a`'s retry is due. The retry must then leave `fresh` at its newer activity
 * (not move it back to its creation time), not bring `doomed` back, and still apply the explicit
 * move back of `rewound`: every entry ends at what its session's meta holds.
 */
import { randomUUID } from "node:crypto";
import { expect } from "vitest";
import type { FullStore } from "../../src/core/types.js";

/** What the scenario needs of the server beside the two stores. */
export interface IndexRetryRig {
  a: FullStore;
  b: FullStore;
  keyPrefix: string;
  /** Warnings store `a` reported. */
  warnings: string[];
  /** Told the owner index's key before any session is made. */
  ownerIndexKnown?: (ownerIndex: string) => Promise<void>;
  /** A new session id (on a Cluster, one whose keys are not on the owner index's node). */
  newId: () => Promise<string>;
  /** Makes writes to the owner's index fail, and lets them through again. */
  refuse: (ownerIndex: string) => Promise<void>;
  allow: (ownerIndex: string) => Promise<void>;
  /** ZSCORE on whichever node holds the key. */
  zScore: (key: string, member: string) => Promise<number | null>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function expectRetryNeverMovesBack(rig: IndexRetryRig): Promise<void> {
  const { a, b, keyPrefix, warnings, zScore } = rig;
  const owner = `owner-${randomUUID()}`;
  const ownerIndex = `${keyPrefix}u:${owner}:sessions`;
  const activityIndex = `${keyPrefix}{index}:activity`;
  const idsIndex = `${keyPrefix}{index}:ids`;
  await rig.ownerIndexKnown?.(ownerIndex);
  const [fresh, doomed, rewound] = [await rig.newId(), await rig.newId(), await rig.newId()];
  await a.createSession({ id: rewound, userId: owner });
  const past = Date.now() - 3_600_000;

  await rig.refuse(ownerIndex);
  await a.createSession({ id: fresh, userId: owner });
  const created = (await a.getSession(fresh))!.lastActivityAt;
  await a.createSession({ id: doomed, userId: owner });
  await a.touchSession(rewound, past);
  for (const id of [fresh, doomed, rewound])
    expect(warnings.filter((w) => w.includes(id)).length).toBeGreaterThanOrEqual(1);
  // Long enough for two retries to fail (after 200 and 400 ms): the next is 800 ms away.
  await sleep(700);
  await rig.allow(ownerIndex);

  // Another process writes in between, and its own index updates land.
  await sleep(5);
  await b.appendMessages(fresh, [{ role: "user", content: "newer" }]);
  const newer = (await b.getSession(fresh))!.lastActivityAt;
  expect(newer).toBeGreaterThan(created);
  expect(await zScore(ownerIndex, fresh)).toBe(newer);
  expect(await b.deleteSession(doomed)).toBe(true);
  expect(await zScore(ownerIndex, doomed)).toBeNull();

  // a's retry has run once the explicit move back of `rewound` shows; the others were in its batch.
  const deadline = Date.now() + 15_000;
  while ((await zScore(ownerIndex, rewound)) !== past) {
    if (Date.now() > deadline) throw new Error("the background retry did not run");
    await sleep(50);
  }
  await sleep(500);
  expect({ owner: await zScore(ownerIndex, fresh), activity: await zScore(activityIndex, fresh) }).toEqual({
    owner: newer,
    activity: newer,
  });
  expect([
    await zScore(ownerIndex, doomed),
    await zScore(activityIndex, doomed),
    await zScore(idsIndex, doomed),
  ]).toEqual([null, null, null]);
  expect(await zScore(activityIndex, rewound)).toBe(past);
  expect((await a.listSessions(owner)).sessions.map((s) => s.id)).toEqual([fresh, rewound]);
}
