/**
 * Searches over a whole SQLite owner on the store's search thread (`sqlite/_search-reader.ts`). Such a
 * search is one statement over every message of the owner holding its words: on the store's thread it
 * held the event loop 80–144 ms at 100,000 messages (docs/benchmarks.md, "Event loop"), ~1.4 s at a
 * million. On the search thread the loop only parses the hits. The same file searched with the thread
 * off gives the same hits, and holds the loop the old way (so the bound below can fail).
 */
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { FullStore, SearchQuery } from "../../src/core/types.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { watchEventLoop } from "../_event-loop-gaps.js";
import { sqliteTempFiles } from "./_sqlite-files.js";

const { freshPath } = sqliteTempFiles("threadkeep-sqlite-search-thread-");
/** 80,000 messages: on the store's thread the relevance search held the loop ~120 ms here, full text ~70 ms. */
const SESSIONS = 400;
const PER_SESSION = 200;
/** The longest a search on the search thread may hold the loop (it held 5–6 ms here: parsing 10 hits). */
const HOLD_BOUND_MS = 30;
/** One session of 40,000 messages, every one matching: its searches read them all. */
const SESSION_MESSAGES = 40_000;
/**
 * The longest a search of that session may hold the loop with the thread (the relevance search parses
 * its 40,000 matches in steps of 2,000 and ranks them in 10 ms slices).
 */
const SESSION_HOLD_BOUND_MS = 50;

/** `SESSIONS` sessions of `PER_SESSION` messages, every one holding the searched words. */
async function fill(store: FullStore, userId: string): Promise<void> {
  for (let s = 0; s < SESSIONS; s++) {
    const id = newSessionId();
    await store.createSession({ id, userId });
    await store.appendMessages(
      id,
      Array.from({ length: PER_SESSION }, (_, i) => ({
        role: i % 2 ? ("assistant" as const) : ("user" as const),
        content: `message ${i} of session ${s}: apples, pears and the weather in spring`,
      })),
    );
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * Makes a session's owner large enough for its searches to go to the search thread (over 10,000 seqs,
 * `THREAD_SPAN` in sqlite/_search.ts): 10,001 messages holding none of the words the tests search for.
 */
async function pastThreadSpan(store: FullStore, sessionId: string): Promise<void> {
  for (let done = 0; done < 10_001; done += 2_001) {
    await store.appendMessages(
      sessionId,
      Array.from({ length: Math.min(2_001, 10_001 - done) }, () => ({ role: "user" as const, content: "filler" })),
    );
  }
}

const queries = (userId: string): SearchQuery[] => [
  { userId, text: "apples weather", ranking: "relevance", limit: 10 },
  { userId, text: "apples pears", mode: "fulltext", limit: 10 },
  { userId, text: "the weather in", mode: "substring", limit: 10 },
];

/** Runs each query, watching the loop: the hits, and the longest hold of each. */
async function searchWatched(store: FullStore, userId: string) {
  const results = [];
  for (const query of queries(userId)) {
    const watch = watchEventLoop(5);
    const hits = await store.search(query);
    results.push({ query, hits, holdMs: watch.stop() });
  }
  return results;
}

describe("sqlite searches over a whole owner on the search thread", () => {
  it("hold the loop far less than on the store's thread, with the same hits", { timeout: 120_000 }, async () => {
    const path = freshPath();
    const store = createSqliteStore({ path });
    try {
      await fill(store, "big");
      // Indexed once, so both stores below search the same index.
      await store.search({ userId: "big", text: "apples", mode: "fulltext", limit: 1 });
      const threaded = await searchWatched(store, "big");
      const inline = createSqliteStore({ path, searchThread: false });
      try {
        const local = await searchWatched(inline, "big");
        const holds = (results: typeof threaded) => results.map((r) => Math.round(r.holdMs));
        for (let i = 0; i < threaded.length; i++) {
          expect(threaded[i].hits).toHaveLength(10);
          expect(threaded[i].hits).toEqual(local[i].hits);
        }
        expect(
          Math.max(...holds(threaded)),
          `holds on the search thread: ${holds(threaded).join(", ")} ms`,
        ).toBeLessThanOrEqual(HOLD_BOUND_MS);
        // The same searches on the store's thread exceed the bound: the check above can fail.
        expect(Math.max(...holds(local)), `holds on the store's thread: ${holds(local).join(", ")} ms`).toBeGreaterThan(
          HOLD_BOUND_MS,
        );
      } finally {
        await inline.close();
      }
    } finally {
      await store.close();
    }
  });

  it(
    "searches of one large session (recall's, with seq bounds, and a person's) hold the loop as little, with the same hits",
    { timeout: 120_000 },
    async () => {
      const path = freshPath();
      const store = createSqliteStore({ path });
      const id = newSessionId();
      try {
        await store.createSession({ id, userId: "long" });
        for (let batch = 0; batch < SESSION_MESSAGES / 1_000; batch++) {
          await store.appendMessages(
            id,
            Array.from({ length: 1_000 }, (_, i) => ({
              role: i % 2 ? ("assistant" as const) : ("user" as const),
              content: `turn ${batch * 1_000 + i}: we talked about apples, pears and the weather in spring`,
            })),
          );
          await new Promise((resolve) => setImmediate(resolve));
        }
        const inSession: SearchQuery[] = [
          // Recall's search: between the latest summary (none) and the window.
          {
            userId: "long",
            sessionId: id,
            text: "apples weather",
            ranking: "relevance",
            afterSeq: 0,
            beforeSeq: SESSION_MESSAGES - 19,
            limit: 50,
          },
          { userId: "long", sessionId: id, text: "apples pears", mode: "fulltext", limit: 10 },
          { userId: "long", sessionId: id, text: "the weather in", mode: "substring", limit: 10 },
        ];
        await store.search({ userId: "long", sessionId: id, text: "apples", mode: "fulltext", limit: 1 });
        const inline = createSqliteStore({ path, searchThread: false });
        try {
          const run = async (on: FullStore) => {
            const results = [];
            for (const query of inSession) {
              const watch = watchEventLoop(5);
              const hits = await on.search(query);
              results.push({ hits, holdMs: Math.round(watch.stop()) });
            }
            return results;
          };
          // The store's thread first: its run also warms the ranking code, so the thread's is measured warm.
          const local = await run(inline);
          const threaded = await run(store);
          for (let i = 0; i < inSession.length; i++) {
            expect(threaded[i].hits).toHaveLength(inSession[i].limit!);
            expect(threaded[i].hits).toEqual(local[i].hits);
          }
          const holds = (results: typeof threaded) => results.map((r) => r.holdMs);
          expect(
            Math.max(...holds(threaded)),
            `holds with the thread: ${holds(threaded).join(", ")} ms`,
          ).toBeLessThanOrEqual(SESSION_HOLD_BOUND_MS);
          expect(Math.max(...holds(local)), `holds without it: ${holds(local).join(", ")} ms`).toBeGreaterThan(
            SESSION_HOLD_BOUND_MS,
          );
        } finally {
          await inline.close();
        }
      } finally {
        await store.close();
      }
    },
  );

  it(
    "many owners searching and appending at once: every search finds each of its owner's awaited appends, and nothing of another's",
    { timeout: 60_000 },
    async () => {
      const store = createSqliteStore({ path: freshPath() });
      try {
        const owners = ["ann", "bob", "cat", "dan"];
        const sessions = new Map<string, string>();
        for (const owner of owners) {
          const id = newSessionId();
          await store.createSession({ id, userId: owner });
          await pastThreadSpan(store, id);
          sessions.set(owner, id);
        }
        // word → [owner, seq], recorded when its append has returned.
        const written = new Map<string, [string, number]>();
        const modes: Pick<SearchQuery, "mode" | "ranking">[] = [
          { ranking: "relevance" },
          { mode: "fulltext" },
          { mode: "substring" },
        ];
        const checks: Promise<void>[] = [];
        let seed = 7;
        const random = (n: number) => {
          seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
          return seed % n;
        };
        for (let step = 0; step < 300; step++) {
          const owner = owners[random(owners.length)];
          const word = `zq${step}q`;
          const appended = store
            .appendMessages(sessions.get(owner)!, [{ role: "user", content: `note ${word} for later` }])
            .then(([message]) => {
              written.set(word, [owner, message.seq]);
            });
          // Every fourth append is awaited before going on; the rest overlap the searches below.
          if (step % 4 === 0) await appended;
          else checks.push(appended);
          const known = [...written];
          if (known.length === 0) continue;
          const [sought, [holder, seq]] = known[random(known.length)];
          const asker = random(3) === 0 ? owners[random(owners.length)] : holder;
          const mode = modes[random(modes.length)];
          checks.push(
            store.search({ userId: asker, text: sought, ...mode, limit: 5 }).then((hits) => {
              const expected = asker === holder ? [[sessions.get(holder), seq]] : [];
              expect(
                hits.map((h) => [h.sessionId, h.seq]),
                `${asker} searching ${sought} (${holder}'s, seq ${seq}) by ${JSON.stringify(mode)}`,
              ).toEqual(expected);
            }),
          );
        }
        await Promise.all(checks);
      } finally {
        await store.close();
      }
    },
  );

  it("finds a message the moment its append returns, in every mode", async () => {
    const store = createSqliteStore({ path: freshPath() });
    try {
      const id = newSessionId();
      await store.createSession({ id, userId: "u" });
      await pastThreadSpan(store, id);
      const [first] = await store.appendMessages(id, [{ role: "user", content: "first words" }]);
      // The thread is running now; the next append is still queued for its group commit when the search starts.
      expect(await store.search({ userId: "u", text: "first", mode: "fulltext" })).toHaveLength(1);
      void store.appendMessages(id, [{ role: "assistant", content: "a zeppelin over Lisbon" }]);
      for (const query of [
        { userId: "u", text: "zeppelin lisbon", ranking: "relevance" },
        { userId: "u", text: "zeppelin", mode: "fulltext" },
        { userId: "u", text: "over lisbon", mode: "substring" },
      ] satisfies SearchQuery[]) {
        const hits = await store.search(query);
        expect(
          hits.map((h) => h.seq),
          JSON.stringify(query),
        ).toEqual([first.seq + 1]);
        expect(hits[0].sessionId).toBe(id);
      }
      // Another owner's search finds none of it.
      expect(await store.search({ userId: "someone else", text: "zeppelin", mode: "fulltext" })).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it("a close lets the thread close its connection: the log is removed; a search still on the wire fails as closed", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path });
    const id = newSessionId();
    await store.createSession({ id, userId: "u" });
    await store.appendMessages(id, [{ role: "user", content: "walnuts and figs" }]);
    expect(await store.search({ userId: "u", text: "walnuts", mode: "fulltext" })).toHaveLength(1);
    const late = expect(store.search({ userId: "u", text: "figs", mode: "substring" })).rejects.toMatchObject({
      code: "store_unavailable",
    });
    await store.close();
    await late;
    // The store's own close removes the log only when no other connection to the file is open: the
    // thread's is closed (and the thread gone) before it.
    expect(existsSync(`${path}-wal`)).toBe(false);
  });
});
