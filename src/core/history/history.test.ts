import { describe, expect, it } from "vitest";
import { createMemoryStore } from "../../stores/in-process/index.js";
import { newSessionId } from "../ids.js";
import { createMemory } from "../../create-memory.js";

const memoryOn = (options: { maxMessages?: number } = {}) =>
  createMemory({ store: createMemoryStore({ ttlMs: 0 }), ...options });
const contents = (messages: { content: unknown }[]) => messages.map((m) => m.content);

describe("Memory history primitives", () => {
  it("pops, replaces after a seq and writes idempotently through a session handle", async () => {
    const memory = memoryOn();
    const chat = await memory.startSession({ userId: "alice" });
    await chat.addMessages(
      [
        { role: "user", content: "q1" },
        { role: "assistant", content: "a1" },
      ],
      { operationId: "turn-1" },
    );
    await chat.addMessages(
      [
        { role: "user", content: "q1" },
        { role: "assistant", content: "a1" },
      ],
      { operationId: "turn-1" },
    );
    expect(contents(await chat.getMessages())).toEqual(["q1", "a1"]);
    expect((await chat.pop())?.content).toBe("a1");
    expect(await chat.replaceAfter(0, [{ role: "user", content: "q1 edited" }], { expectedLastSeq: 1 })).toMatchObject([
      { seq: 1 },
    ]);
    expect(contents(await chat.getMessages())).toEqual(["q1 edited"]);
    expect(await chat.pop()).toMatchObject({ content: "q1 edited" });
    expect(await chat.pop()).toBeNull();
    await memory.close();
  });

  it("applies the message cap to a replacement", async () => {
    const memory = memoryOn({ maxMessages: 3 });
    const id = newSessionId();
    await memory.replaceAfter(
      id,
      0,
      ["1", "2", "3", "4"].map((content) => ({ role: "user" as const, content })),
    );
    expect(contents(await memory.getMessages(id))).toEqual(["2", "3", "4"]);
    await memory.close();
  });

  it("keeps regenerated answers as branches, switches back, and continues from a seq", async () => {
    const memory = memoryOn();
    const chat = await memory.startSession({ userId: "alice" });
    await chat.addMessages([
      { role: "user", content: "cat name?" },
      { role: "assistant", content: "Whiskers" },
    ]);
    await chat.replaceAfter(1, [{ role: "assistant", content: "Luna" }], { branch: { reason: "regenerate" } });
    const [branch] = await chat.listBranches();
    expect(branch).toMatchObject({ id: 1, atSeq: 1, reason: "regenerate", parentId: null });
    expect(contents((await chat.getBranch(1)).messages)).toEqual(["Whiskers"]);
    await chat.switchBranch(1);
    expect(contents(await chat.getMessages())).toEqual(["cat name?", "Whiskers"]);
    const forked = await chat.branchAt(1);
    expect(forked).toMatchObject({ id: 2, atSeq: 1, reason: "fork" });
    expect(contents(forked!.messages)).toEqual(["Whiskers"]);
    expect(await chat.branchAt(1)).toBeNull();
    await expect(chat.getBranch(9)).rejects.toMatchObject({ code: "not_found" });
    await memory.close();
  });

  it("hides every history operation on another owner's session", async () => {
    const memory = memoryOn();
    const id = newSessionId();
    await memory.addMessages(
      id,
      [
        { role: "user", content: "mine" },
        { role: "assistant", content: "yes" },
      ],
      { userId: "alice" },
    );
    await memory.replaceAfter(id, 1, [{ role: "assistant", content: "again" }], {
      userId: "alice",
      branch: { reason: "regenerate" },
    });
    const bob = { userId: "bob" };
    for (const attempt of [
      memory.pop(id, bob),
      memory.replaceAfter(id, 0, [{ role: "user", content: "x" }], bob),
      memory.addMessages(id, [{ role: "user", content: "x" }], { ...bob, operationId: "op" }),
      memory.listBranches(id, bob),
      memory.getBranch(id, 1, bob),
      memory.switchBranch(id, 1, bob),
      memory.branchAt(id, 0, bob),
    ]) {
      await expect(attempt).rejects.toMatchObject({ code: "session_not_found" });
    }
    expect(contents(await memory.getMessages(id, { userId: "alice" }))).toEqual(["mine", "again"]);
    expect(await memory.listBranches(id, { userId: "alice" })).toHaveLength(1);
    await memory.close();
  });
});
