/**
 * In-code BM25 (memory, file and Redis stores, completeStore's derived search) over one large owner,
 * with the loop watched: the ranking tokenizes in slices of about 10 ms and lets other requests run
 * between them (core/store/relevance.ts), so the search does not stop everyone else (issue 34).
 * Run in one go, the same 20,000 messages held the loop 110–340 ms on a shared 2-core machine
 * (docs/benchmarks.md, "Event loop"). The bound, 100 ms, is the "fix what holds it longer
 * than 100 ms", ten slices: room for a garbage collection and a loaded machine, well under the 250 ms
 * another user may wait. The monitor counts the time this thread ran, not its wait for a core.
 */
import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { rankByRelevance } from "../../src/core/store/relevance.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { withinLoopBound } from "../_event-loop-gaps.js";

const MESSAGES = 20_000;
const PER_SESSION = 500;
const BOUND_MS = 100;
const WORDS =
  "caroline painting museum trip dog cat running weekend family concert music guitar paris lake hiking books reading coffee garden friends".split(
    " ",
  );

/** A 35-word message; which words, and how often, varies with `i` so BM25 has something to rank. */
const text = (i: number) => Array.from({ length: 35 }, (_, j) => WORDS[(i * 7 + j * j * 13) % WORDS.length]).join(" ");

describe("relevance search and the event loop", () => {
  it("ranks a 20,000-message owner without holding the loop longer than 100 ms, with the hits of the one-go ranking", async () => {
    const store = createMemoryStore();
    const sessions: { sessionId: string; messages: Awaited<ReturnType<typeof store.getMessages>> }[] = [];
    for (let s = 0; s < MESSAGES / PER_SESSION; s++) {
      const session = await store.createSession({ id: newSessionId(), userId: "big" });
      await store.appendMessages(
        session.id,
        Array.from({ length: PER_SESSION }, (_, k) => ({ role: "user" as const, content: text(s * PER_SESSION + k) })),
      );
      sessions.push({ sessionId: session.id, messages: await store.getMessages(session.id) });
    }
    const query = "when did caroline go to the museum with her dog";
    const { value: hits, longestMs } = await withinLoopBound("relevance search of 20,000 messages", BOUND_MS, () =>
      store.search({ userId: "big", text: query, ranking: "relevance", limit: 10 }),
    );
    expect(hits).toHaveLength(10);
    expect(hits).toEqual(rankByRelevance(sessions, query, 10));
    expect(longestMs).toBeLessThanOrEqual(BOUND_MS);
  });
});
