import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { OWNER_SCAN_LIMIT } from "../../src/stores/postgres/_search.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";

const enabled = await serviceAvailable("postgres");
const schema = `tk_test_${randomBytes(6).toString("hex")}`;

describe.skipIf(enabled !== true)("postgres full-text search, small and large owners", () => {
  const store = createPostgresStore({ url: TEST_POSTGRES_URL, schema, poolSize: 2 });
  afterAll(async () => {
    await store.close();
    const admin = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {} });
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  it("finds the same messages whether the owner's rows are scanned or the GIN index is used", async () => {
    const owner = `big-${randomBytes(4).toString("hex")}`;
    const stranger = `other-${randomBytes(4).toString("hex")}`;
    // A session past the scan limit makes the owner large; the small session alone is small.
    const big = await store.createSession({ id: newSessionId(), userId: owner });
    for (let done = 0; done <= OWNER_SCAN_LIMIT; done += 2_000) {
      const batch = Array.from({ length: 2_000 }, (_, i) => ({
        role: "user" as const,
        content: `filler line ${done + i}`,
      }));
      if (done === 10_000) batch[7] = { role: "user", content: "the zebra in the big session" };
      await store.appendMessages(big.id, batch);
    }
    const small = await store.createSession({ id: newSessionId(), userId: owner });
    await store.appendMessages(small.id, [
      { role: "user", content: "a zebra crossing" },
      { role: "user", content: "zebras and giraffes" },
      { role: "user", content: "nothing here" },
    ]);
    const theirs = await store.createSession({ id: newSessionId(), userId: stranger });
    await store.appendMessages(theirs.id, [{ role: "user", content: "the stranger's zebra" }]);

    const contents = async (q: Parameters<typeof store.search>[0]) =>
      (await store.search(q)).map((h) => h.message.content);
    // Large owner (GIN index): every match of theirs, newest first, none of the stranger's.
    expect(await contents({ userId: owner, text: "zebra", mode: "fulltext" })).toEqual([
      "zebras and giraffes",
      "a zebra crossing",
      "the zebra in the big session",
    ]);
    const ranked = await contents({ userId: owner, text: "zebra giraffe", mode: "fulltext", ranking: "relevance" });
    expect(ranked[0]).toBe("zebras and giraffes");
    expect(ranked.slice(1).sort()).toEqual(["a zebra crossing", "the zebra in the big session"]);
    // One small session (scanned), and the small stranger (scanned).
    expect(await contents({ userId: owner, sessionId: small.id, text: "zebra", mode: "fulltext" })).toEqual([
      "zebras and giraffes",
      "a zebra crossing",
    ]);
    expect(
      await contents({
        userId: owner,
        sessionId: small.id,
        text: "zebra giraffe",
        mode: "fulltext",
        ranking: "relevance",
      }),
    ).toEqual(["zebras and giraffes", "a zebra crossing"]);
    expect(await contents({ userId: stranger, text: "zebra", mode: "fulltext" })).toEqual(["the stranger's zebra"]);
    expect(await contents({ userId: stranger, sessionId: small.id, text: "zebra", mode: "fulltext" })).toEqual([]);
    expect(await contents({ userId: owner, sessionId: theirs.id, text: "zebra", mode: "fulltext" })).toEqual([]);
  }, 60_000);
});
