/** What the adapter test files share: the fake upstream, an in-memory Memory, and what the model was sent. */
import { afterAll, beforeAll } from "vitest";
import type { Memory } from "../../src/core/memory/memory.js";
import { createMemory } from "../../src/create-memory.js";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";

/** Starts the fake upstream and a `memory:` Memory before the file's tests and closes both after. */
export function useFakeAndMemory(): { readonly fake: FakeUpstream; readonly memory: Memory } {
  const ctx = {} as { fake: FakeUpstream; memory: Memory };
  beforeAll(async () => {
    ctx.fake = await startFakeUpstream();
    ctx.memory = createMemory({ store: "memory:" });
  });
  afterAll(async () => {
    await ctx.memory?.close();
    await ctx.fake?.close();
  });
  return ctx;
}

/** Starts the fake upstream before the file's tests and closes it after. */
export function useFakeUpstream(): { readonly fake: FakeUpstream } {
  const ctx = {} as { fake: FakeUpstream };
  beforeAll(async () => {
    ctx.fake = await startFakeUpstream();
  });
  afterAll(() => ctx.fake?.close());
  return ctx;
}

/** The last chat request's messages as `role: text` (frameworks send text as a string or as text parts). */
export function lastSentTexts(fake: FakeUpstream): string[] {
  return fake
    .chatRequests()
    .at(-1)!
    .body.messages.map(
      (m: { role: string; content: unknown }) =>
        `${m.role}: ${typeof m.content === "string" ? m.content : (m.content as { text?: string }[]).map((p) => p.text ?? "").join("")}`,
    );
}
