/**
 * Failover of PostgreSQL to a streaming standby: a primary and a synchronous standby of this file's
 * own (on free ports), the store on the multi-host URL
 * `postgres://…@127.0.0.1:<primary>,127.0.0.1:<standby>/postgres?target_session_attrs=read-write`. The
 * primary is killed with SIGKILL while sessions write and the standby is promoted at once (as a
 * failover manager would): writes succeed again on the promoted standby within a bound, with no
 * reconfiguration, and no write the store acknowledged is missing there.
 *
 * `THREADKEEP_REPORT_FAILOVER=1` prints the measured times (docs/troubleshooting.md, "Failure modes").
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { isThreadkeepError, type ThreadkeepError } from "../../src/core/errors.js";
import { newSessionId } from "../../src/core/ids.js";
import type { SessionStore } from "../../src/core/types.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { type PostgresPair, standbyAvailable, startPostgresPair } from "../_postgres-standby.js";
import { until } from "../_wait.js";

/** Generous for a loaded 2-core CI machine: measured figures are far below (see the report). */
const RECOVERY_BOUND_MS = 15_000;
const report = (line: string) => {
  if (process.env.THREADKEEP_REPORT_FAILOVER) console.log(`[postgres failover] ${line}`);
};

const enabled = standbyAvailable("the PostgreSQL failover test");
const pair: PostgresPair | undefined = enabled === true ? await startPostgresPair({ synchronous: true }) : undefined;
afterAll(async () => {
  await pair?.stop();
});

/** One session written to in a loop: what was acknowledged, what failed and when. */
interface Writer {
  id: string;
  acked: string[];
  failures: { at: number; error: ThreadkeepError }[];
  /** When the first write that succeeded after a failure was acknowledged. */
  backAt?: number;
}

describe("the PostgreSQL store when the primary fails over to a standby", { timeout: 50_000 }, () => {
  it("follows the multi-host URL to the promoted standby; with synchronous replication no acknowledged write is lost", async (ctx) => {
    if (enabled !== true) return ctx.skip(enabled);
    const url = `postgres://postgres@127.0.0.1:${pair!.primaryPort},127.0.0.1:${pair!.standbyPort}/postgres?target_session_attrs=read-write`;
    const store: SessionStore = createPostgresStore({ url, poolSize: 4 });
    try {
      const writers: Writer[] = [];
      for (let i = 0; i < 8; i++) {
        const id = newSessionId();
        await store.createSession({ id, userId: `failover-${i}` });
        writers.push({ id, acked: [], failures: [] });
      }
      // The standby's WAL receiver frozen: the primary acknowledges no commit (the write fails when
      // its time is up, its outcome unknown), so an acknowledged write is one the standby holds.
      const impatient = createPostgresStore({ url, poolSize: 1, queryTimeoutMs: 1_000 });
      // Connected first (on a loaded machine the first use, which checks the schema, may outlast the
      // short timeout): closing the store while its connection is still being set up leaves the
      // driver's setup query rejected unhandled.
      let alone = "";
      await until("the second store has connected", () => {
        alone = newSessionId();
        return impatient.createSession({ id: alone, userId: "failover-alone" }).then(() => true);
      });
      const thaw = await pair!.freezeStandby();
      try {
        const refused = await impatient.appendMessages(alone, [{ role: "user", content: "unconfirmed" }]).then(
          () => undefined,
          (error: unknown) => error,
        );
        // The store's own deadline: the commit is waiting for the standby, so its outcome is unknown.
        expect(isThreadkeepError(refused, "store_unavailable"), String(refused)).toBe(true);
        expect((refused as ThreadkeepError).details, String(refused)).toMatchObject({ outcome: "unknown" });
      } finally {
        thaw();
        await impatient.close();
      }

      let stopped = false;
      const load = Promise.all(
        writers.map(async (writer) => {
          for (let i = 0; !stopped; i++) {
            const content = `${writer.id} #${i}`;
            try {
              await store.appendMessages(writer.id, [{ role: "user", content }]);
              writer.acked.push(content);
              if (writer.failures.length > 0 && writer.backAt === undefined) writer.backAt = Date.now();
            } catch (error) {
              writer.failures.push({ at: Date.now(), error: error as ThreadkeepError });
              writer.backAt = undefined;
              await sleep(20);
            }
          }
        }),
      );
      await until("every session has written", () => writers.every((w) => w.acked.length >= 3));
      const killedAt = Date.now();
      await pair!.killPrimary();
      await pair!.promoteStandby();
      const promotedMs = Date.now() - killedAt;
      await until(
        "every session writes again",
        () => writers.every((w) => w.failures.length > 0 && w.backAt !== undefined),
        {
          timeoutMs: RECOVERY_BOUND_MS,
          everyMs: 10,
        },
      ).finally(() => {
        stopped = true;
      });
      await load;
      const backMs = Math.max(...writers.map((w) => w.backAt! - killedAt));

      // The outage is a store error the server turns into `not-saved` / `save-unconfirmed`, never another kind.
      for (const writer of writers) {
        for (const { error } of writer.failures)
          expect(isThreadkeepError(error, "store_unavailable"), String(error)).toBe(true);
      }
      expect(backMs).toBeLessThan(RECOVERY_BOUND_MS);
      const lost: string[] = [];
      for (const writer of writers) {
        const stored = new Set((await store.getMessages(writer.id)).map((m) => m.content));
        lost.push(...writer.acked.filter((content) => !stored.has(content)));
      }
      expect(lost).toEqual([]);
      report(
        `synchronous standby promoted ${promotedMs} ms after the kill; every session writing again ${backMs} ms after the kill; ` +
          `${writers.reduce((n, w) => n + w.acked.length, 0)} writes acknowledged, 0 lost`,
      );
    } finally {
      await store.close();
    }
  });
});
