import { describe, expect, it } from "vitest";
import { createMemory } from "../../create-memory.js";
import { newSessionId } from "../ids.js";
import { createMemoryStore } from "../../stores/in-process/index.js";

describe("recall within a turn that replaces the line's end", () => {
  it("reads a recalled message's neighbours only up to where the kept history ends", async () => {
    const memory = createMemory({ store: createMemoryStore(), window: 2 });
    const id = newSessionId();
    await memory.addMessages(id, [
      { role: "user", content: "Which apple varieties make the best apple pie?" },
      { role: "assistant", content: "Bramley apples." },
      { role: "user", content: "How long does it bake?" },
      { role: "assistant", content: "About 45 minutes." },
      { role: "user", content: "Can I freeze it?" },
      { role: "assistant", content: "The answer being replaced." },
    ]);
    const input = [{ role: "user" as const, content: "Which apple varieties again, for the apple pie?" }];
    const replacing = await memory.buildContext(id, { upToSeq: 5, input });
    const texts = replacing.messages.map((m) => m.content);
    // The first question is recalled (outside the window), with its neighbours, but none past seq 5.
    expect(texts).toContain("Which apple varieties make the best apple pie?");
    expect(texts).not.toContain("The answer being replaced.");
    // Without a replacement the same neighbours do reach the line's end.
    expect((await memory.buildContext(id, { input })).messages.map((m) => m.content)).toContain(
      "The answer being replaced.",
    );
  });
});

describe("recall by words in a long summarized session", () => {
  it("finds an uncovered message outside the window when the best matches are all covered by the summary", async () => {
    const store = createMemoryStore();
    const memory = createMemory({ store, window: 4 });
    const id = newSessionId();
    // 60 messages that match the question better than anything after them, all under the summary: more
    // than the ranking's depth (50), so a search without bounds returned only those and recall nothing.
    await memory.addMessages(
      id,
      Array.from({ length: 60 }, (_, i) => ({
        role: "user" as const,
        content: `apple pie crust apple pie filling, note ${i}`,
      })),
    );
    await store.saveSummary(id, { fromSeq: 1, toSeq: 60, content: "We talked about apple pie at length." });
    await memory.addMessages(id, [
      { role: "user", content: "My grandmother's apple pie used cardamom." },
      ...Array.from({ length: 6 }, (_, i) => ({ role: "assistant" as const, content: `Something else ${i}.` })),
    ]);
    const input = [{ role: "user" as const, content: "What spice went into the apple pie?" }];
    const context = await memory.buildContext(id, { input });
    expect(context.recalled?.map((r) => r.seq)).toEqual([61]);
    expect(context.messages.map((m) => m.content)).toContain("My grandmother's apple pie used cardamom.");
  });
});
