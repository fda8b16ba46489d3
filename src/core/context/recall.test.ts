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
