import { describe, expect, it } from "vitest";
import { createMemory } from "../../src/create-memory.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("Memory.runTurn", () => {
  it("fails a turn that waits longer than its bound with session_busy, and serves the rest in order", async () => {
    const memory = createMemory({ store: createMemoryStore({ ttlMs: 0 }), turnWaitMs: 60 });
    const chat = await memory.startSession();
    const order: string[] = [];
    const slow = memory.runTurn(chat.id, async () => {
      order.push("slow");
      await sleep(150);
    });
    const impatient = memory.runTurn(chat.id, async () => order.push("impatient"));
    const patient = memory.runTurn(chat.id, async () => order.push("patient"), { waitMs: 1000 });
    await expect(impatient).rejects.toMatchObject({
      code: "session_busy",
      status: 429,
      message: expect.stringContaining(`Timed out after 60 ms waiting for the turn of session ${chat.id}`),
    });
    await slow;
    await patient;
    expect(order).toEqual(["slow", "patient"]);
    await memory.close();
  });

  it("releases the turn when the turn throws", async () => {
    const memory = createMemory({ store: createMemoryStore({ ttlMs: 0 }) });
    const chat = await memory.startSession();
    await expect(memory.runTurn(chat.id, async () => Promise.reject(new Error("upstream down")))).rejects.toThrow(
      "upstream down",
    );
    expect(await memory.runTurn(chat.id, async () => "next", { waitMs: 50 })).toBe("next");
    await memory.close();
  });
});
