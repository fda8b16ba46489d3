/**
 * The PostgreSQL store's IVF build (postgres/_ivf.ts: k-means training and every vector's cell and
 * int8 code, computed in this process) gives the event loop back between slices: from an owner's first
 * search (which starts the build) until its training is ready, the loop is never held longer than
 * 250 ms (issue 34), while another user lists their sessions every 20 ms. The threshold is lowered
 * through `vectorIndex.minOwnerVectors` and the owner holds exactly that many vectors of 768
 * dimensions, so the build is a real one at the smallest size that starts it.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { seededRandom } from "../../bench/_harness.js";
import { listSessionsMeanwhile, withinLoopBound } from "../_event-loop-gaps.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { until } from "../_wait.js";

const enabled = await serviceAvailable("postgres");
const schema = `tk_test_${randomBytes(6).toString("hex")}`;

const MODEL = "m";
const DIMS = 768;
/** The build threshold, lowered from the default 5,000 to keep the test short. */
const MIN_OWNER_VECTORS = 3000;
/** Exactly the threshold: the smallest owner that is indexed. */
const VECTORS = MIN_OWNER_VECTORS;
const PER_SESSION = 500;
/** The longest another user's request may wait (the bound). */
const BOUND_MS = 250;

describe.skipIf(enabled !== true)("postgres vector index build and the event loop", () => {
  const store = createPostgresStore({
    url: TEST_POSTGRES_URL,
    schema,
    poolSize: 3,
    vectorIndex: { minOwnerVectors: MIN_OWNER_VECTORS },
  });
  const admin = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
  afterAll(async () => {
    await store.close();
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  it(`holds the loop at most 250 ms while a ${VECTORS}-vector owner is trained and coded`, async () => {
    const random = seededRandom(3420);
    const vector = () => Array.from({ length: DIMS }, () => random() - 0.5);
    const other = newSessionId();
    await store.createSession({ id: other, userId: "other" });
    for (let s = 0; s < VECTORS / PER_SESSION; s++) {
      const id = newSessionId();
      await store.createSession({ id, userId: "big" });
      const added = await store.appendMessages(
        id,
        Array.from({ length: PER_SESSION }, (_, i) => ({ role: "user" as const, content: `${s}.${i}` })),
      );
      await store.putEmbeddings(
        id,
        MODEL,
        added.map((m) => ({ seq: m.seq, createdAt: m.createdAt, vector: vector() })),
      );
    }
    const ready = async () => (await admin`SELECT 1 FROM vector_ivf WHERE user_id = 'big' AND ready`).length > 0;
    expect(await ready()).toBe(false);

    const lister = listSessionsMeanwhile(store, "other", [other]);
    const built = await withinLoopBound(`building the index of ${VECTORS} × ${DIMS} vectors`, BOUND_MS, async () => {
      // The first search scans exactly (in PostgreSQL) and starts the build in the background.
      expect(await store.searchVectors({ userId: "big", model: MODEL, vector: vector(), limit: 10 })).toHaveLength(10);
      await until("the owner's training is ready", ready, { timeoutMs: 90_000, everyMs: 50 });
    });
    await lister.stop();
    const [{ n: codes }] = await admin<{ n: number }[]>`SELECT count(*)::int AS n FROM vector_codes`;
    // Wall times of a PostgreSQL round trip include the server's own wait for a core: logged, not bounded.
    console.log(
      `[loop] postgres IVF build of ${VECTORS} × ${DIMS}: longest hold ${Math.round(built.longestMs)} ms; ${lister.listed} lists, slowest ${Math.round(lister.slowest)} ms`,
    );
    expect(codes).toBe(VECTORS);
    expect(lister.listed).toBeGreaterThan(0);
  }, 180_000);
});
