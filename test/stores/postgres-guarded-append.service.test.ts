/**
 * A guarded append (`AppendOptions.sessionCreatedAt`, as fork, import and migrate send it) beside the
 * other writes to the same session. Each write that takes both the session's advisory lock and its row
 * lock must take them in that order: a guarded append once locked the row (`FOR KEY SHARE`, in its
 * statement's `WHERE`) before queuing on the advisory lock, while `threadkeep_write` (an append with
 * `operationId`, `replaceAfter`) and `switchBranch` hold the advisory lock and then ask for the row
 * `FOR UPDATE`: opposite orders, and PostgreSQL aborted one of them (40P01, `store_unavailable`).
 */
import { describe, expect, it } from "vitest";
import { isThreadkeepError } from "../../src/core/errors.js";
import { newSessionId } from "../../src/core/ids.js";
import { serviceAvailable } from "../_services.js";
import { postgresStoresInSchema } from "./_postgres-stores.js";

const enabled = await serviceAvailable("postgres");

describe.runIf(enabled === true)("postgres: guarded appends beside other writes to one session", () => {
  const { store, other } = postgresStoresInSchema();

  it.each([
    ["unguarded", false],
    ["guarded", true],
  ])(
    "%s appends beside idempotent appends: no write fails",
    async (_, guarded) => {
      const id = newSessionId();
      const session = await store.createSession({ id, userId: "u" });
      const failures: string[] = [];
      const fail = (e: unknown) => failures.push(`${isThreadkeepError(e) ? e.code : ""} ${(e as Error).message}`);
      await Promise.all(
        Array.from({ length: 10 }, (_, i) => [
          other.appendMessages(id, [{ role: "user", content: `turn ${i}` }], { operationId: `op-${i}` }).catch(fail),
          store
            .appendMessages(
              id,
              [{ role: "user", content: `copied ${i}` }],
              guarded ? { sessionCreatedAt: session.createdAt } : {},
            )
            .catch(fail),
        ]).flat(),
      );
      expect(failures).toEqual([]);
      expect(await store.countMessages(id)).toBe(20);
    },
    60_000,
  );

  it("guarded appends, plain appends, tail replacements and guarded idempotent appends at once: no write fails", async () => {
    const id = newSessionId();
    const session = await store.createSession({ id, userId: "u" });
    await store.appendMessages(id, [{ role: "user", content: "first" }]);
    const failures: string[] = [];
    const fail = (e: unknown) => failures.push(`${isThreadkeepError(e) ? e.code : ""} ${(e as Error).message}`);
    const guard = { sessionCreatedAt: session.createdAt };
    await Promise.all(
      Array.from({ length: 8 }, (_, i) => [
        store.appendMessages(id, [{ role: "user", content: `copied ${i}` }], guard).catch(fail),
        other.appendMessages(id, [{ role: "user", content: `plain ${i}` }]).catch(fail),
        other
          .replaceAfter(id, 1, [{ role: "assistant", content: `again ${i}` }], { branch: { reason: "regenerate" } })
          .catch(fail),
        store
          .appendMessages(id, [{ role: "user", content: `guarded op ${i}` }], { ...guard, operationId: `g-${i}` })
          .catch(fail),
      ]).flat(),
    );
    expect(failures).toEqual([]);
    const [firstMessage] = await store.getMessages(id, { limit: 1 });
    expect(firstMessage?.content).toBe("first");
  }, 60_000);

  it("a guarded append into a session created again under its id is refused", async () => {
    const id = newSessionId();
    const old = await store.createSession({ id, userId: "u" });
    await store.deleteSession(id);
    await new Promise((r) => setTimeout(r, 2));
    await store.createSession({ id, userId: "u" });
    const refused = await store
      .appendMessages(id, [{ role: "user", content: "late" }], { sessionCreatedAt: old.createdAt })
      .catch((e: unknown) => e);
    expect(isThreadkeepError(refused) && refused.code).toBe("session_not_found");
    const alsoRefused = await store
      .appendMessages(id, [{ role: "user", content: "late" }], { sessionCreatedAt: old.createdAt, operationId: "x" })
      .catch((e: unknown) => e);
    expect(isThreadkeepError(alsoRefused) && alsoRefused.code).toBe("session_not_found");
    expect(await store.countMessages(id)).toBe(0);
  });
});
