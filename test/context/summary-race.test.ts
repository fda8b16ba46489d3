/**
 * Compaction against a session deleted and created again under its id while the summary request
 * runs: the old session's summary must not land in the new one (its text would be wrong, and its
 * `toSeq` would let the cap drop the new session's messages, which no summary covers).
 */
import { describe, expect, it, vi } from "vitest";
import type { Summarizer } from "../../src/core/context/summarize.js";
import { createMemory } from "../../src/create-memory.js";
import type { MessageInput, FullStore } from "../../src/core/types.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";

const turns = (from: number, to: number): MessageInput[] =>
  Array.from({ length: to - from + 1 }, (_, i) => ({
    role: i % 2 === 0 ? "user" : "assistant",
    content: `message ${from + i}`,
  }));

/** A summarizer whose first request waits until `release()`; `started` resolves when it is asked. */
function gatedSummarizer() {
  let started!: () => void;
  let release!: () => void;
  const startedP = new Promise<void>((resolve) => (started = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  const summarizer: Summarizer = {
    async summarize({ messages }) {
      started();
      await released;
      return `old session, messages ${messages[0].seq}–${messages[messages.length - 1].seq}`;
    },
  };
  return { summarizer, started: startedP, release };
}

async function race(store: FullStore) {
  const gate = gatedSummarizer();
  const compacting = createMemory({
    store,
    summarizer: gate.summarizer,
    window: 10,
    maxMessages: 20,
    compaction: { threshold: 5 },
  });
  const other = createMemory({ store, maxMessages: 0 });
  const chat = await compacting.startSession();
  await chat.addMessages(turns(1, 15)); // 5 outside the window: not more than the threshold yet
  const adding = chat.addMessage(turns(16, 16)[0]); // 6 outside: the summary request starts

  await gate.started;
  await other.deleteSession(chat.id);
  // createdAt tells incarnations apart to the millisecond.
  const deletedAt = Date.now();
  while (Date.now() === deletedAt) await new Promise((resolve) => setTimeout(resolve, 1));
  const again = await other.startSession({ id: chat.id });
  await again.addMessages(turns(1, 20));
  // The summary of the deleted session cannot be saved: compaction warns and keeps the messages.
  const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
  gate.release();
  await adding;
  await compacting.idle();
  const warned = warn.mock.calls.map(([message]) => String(message));
  warn.mockRestore();
  expect(warned).toEqual([
    `[threadkeep] summarizing session ${chat.id} failed, its messages are kept: SessionNotFoundError: No session with id ${chat.id}`,
  ]);

  const summaries = await other.listSummaries(chat.id);
  const seqs = (await other.getMessages(chat.id)).map((m) => m.seq);
  await compacting.close();
  return { summaries, seqs };
}

describe("compaction racing a session deleted and created again", () => {
  it("does not save the old session's summary into the new one", async () => {
    const { summaries, seqs } = await race(createMemoryStore({ ttlMs: 0 }));
    expect(summaries).toEqual([]);
    expect(seqs).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it("on a store without guardedSummaries, re-reads the session before saving", async () => {
    const store = createMemoryStore({ ttlMs: 0 });
    const unguarded: FullStore = Object.assign(Object.create(store) as FullStore, {
      capabilities: { ...store.capabilities, guardedSummaries: false },
    });
    const { summaries } = await race(unguarded);
    expect(summaries).toEqual([]);
  });
});
