/**
 * The seed scenarios, end to end through the library: a small task application keeps its thread in
 * threadkeep, resolves "that task" and "yes" without a model call, and sends the assembled context
 * (with the state note) to a fake OpenAI-compatible model.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Memory } from "../../src/core/memory/memory.js";
import type { SessionHandle } from "../../src/core/memory/memory.js";
import { createMemory } from "../../src/create-memory.js";
import { createUpstream } from "../../src/llm/openai-compatible.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";

let upstream: FakeUpstream;
beforeAll(async () => {
  upstream = await startFakeUpstream();
});
afterAll(() => upstream.close());

interface Task {
  id: number;
  title: string;
  due?: string;
}

/** The application: its own task store, threadkeep for the conversation. */
function taskApp(memory: Memory) {
  const tasks = new Map<number, Task>();
  const deleted: number[] = [];
  let nextId = 1;
  const model = createUpstream({ baseUrl: upstream.url });

  async function decide(chat: SessionHandle, text: string): Promise<string> {
    const meaning = await chat.resolve(text);
    if (meaning.kind === "confirm") {
      const action = await chat.confirmPending({ id: meaning.pending.id });
      if (!action) return "There is nothing to confirm.";
      const id = action.args.id as number;
      tasks.delete(id);
      deleted.push(id);
      return `Deleted task ${id}.`;
    }
    if (meaning.kind === "cancel") {
      await chat.cancelPending();
      return "Cancelled.";
    }
    if (meaning.kind === "expired") {
      await chat.cancelPending();
      return "That question expired; ask again if you still want it.";
    }
    const created = /^create a task: (.+)$/i.exec(text);
    if (created) {
      const task = { id: nextId++, title: created[1] };
      tasks.set(task.id, task);
      await chat.addReference({ type: "task", id: task.id, label: task.title });
      await chat.setIntent("create_task");
      return `Created task ${task.id}: ${task.title}.`;
    }
    const task =
      meaning.kind === "reference" && meaning.entity.type === "task" ? tasks.get(Number(meaning.entity.id)) : undefined;
    if (task && /due tomorrow/i.test(text)) {
      task.due = "tomorrow";
      await chat.setIntent("update_task");
      return `Task ${task.id} is now due tomorrow.`;
    }
    if (task && /^delete/i.test(text)) {
      await chat.setPendingConfirmation({
        action: "delete_task",
        args: { id: task.id },
        prompt: `Delete task ${task.id}?`,
      });
      return `Delete task ${task.id} (${task.title})? Say yes or cancel.`;
    }
    return "Sorry, which task?";
  }

  /** One turn: decide, let the model see the context, store user message and reply together. */
  async function turn(chat: SessionHandle, text: string): Promise<string> {
    return memory.runTurn(chat.id, async (lease) => {
      const reply = await decide(chat, text);
      const context = await chat.context({
        system: [{ role: "system", content: "You manage tasks." }],
        input: [{ role: "user", content: text }],
      });
      await model.chat({ model: "fake", messages: context.messages });
      await memory.addMessages(
        chat.id,
        [
          { role: "user", content: text },
          { role: "assistant", content: reply },
        ],
        {
          userId: chat.userId,
          fence: lease.fence,
        },
      );
      return reply;
    });
  }

  return { tasks, deleted, turn };
}

const lastSystemNote = () =>
  upstream
    .chatRequests()
    .at(-1)
    ?.body.messages.filter((m: { role: string }) => m.role === "system")
    .map((m: { content: string }) => m.content)
    .join("\n");

describe("seed scenarios", () => {
  it("create, refer back, delete with confirmation, confirm exactly once, cancel", async () => {
    const memory = createMemory({ store: createMemoryStore({ ttlMs: 0 }) });
    const app = taskApp(memory);
    const chat = await memory.startSession({ userId: "alice" });

    expect(await app.turn(chat, "Create a task: buy groceries")).toBe("Created task 1: buy groceries.");
    expect(await app.turn(chat, "Actually, make that due tomorrow")).toBe("Task 1 is now due tomorrow.");
    expect(app.tasks.get(1)).toEqual({ id: 1, title: "buy groceries", due: "tomorrow" });
    expect(lastSystemNote()).toContain("Recently referenced: task 1 (buy groceries)");

    expect(await app.turn(chat, "delete that task")).toBe("Delete task 1 (buy groceries)? Say yes or cancel.");
    expect(app.tasks.has(1)).toBe(true);
    expect(lastSystemNote()).toContain('Waiting for the user to confirm: delete_task {"id":1} ("Delete task 1?")');

    expect(await app.turn(chat, "yes")).toBe("Deleted task 1.");
    expect(await app.turn(chat, "yes")).not.toBe("Deleted task 1.");
    expect(app.deleted).toEqual([1]);
    expect((await chat.conversation()).pending).toBeUndefined();

    await app.turn(chat, "Create a task: call the plumber");
    expect(await app.turn(chat, "delete that task")).toBe("Delete task 2 (call the plumber)? Say yes or cancel.");
    expect(await app.turn(chat, "cancel")).toBe("Cancelled.");
    expect((await chat.conversation()).pending).toBeUndefined();
    await app.turn(chat, "yes");
    expect(app.deleted).toEqual([1]);
    expect(app.tasks.has(2)).toBe(true);

    // The model saw the whole thread: the 8 turns before the last (16 messages, inside the window of 20) and the input.
    const lastRequest = upstream.chatRequests().at(-1)?.body;
    expect(lastRequest.messages.filter((m: { role: string }) => m.role !== "system")).toHaveLength(17);
    await memory.close();
  });

  it("works in Dutch, and hands a confirmation to one of two racing callers only", async () => {
    const memory = createMemory({ store: createMemoryStore({ ttlMs: 0 }) });
    const app = taskApp(memory);
    const chat = await memory.startSession();
    await app.turn(chat, "Create a task: boodschappen doen");
    expect(await app.turn(chat, "Verwijder die taak")).toBe("Sorry, which task?"); // "verwijder" is not the app's word for delete
    await chat.setPendingConfirmation({ action: "delete_task", args: { id: 1 } });
    expect(await app.turn(chat, "Ja, doe maar")).toBe("Deleted task 1.");
    expect(app.deleted).toEqual([1]);

    await chat.setPendingConfirmation({ action: "delete_task", args: { id: 9 } });
    const taken = await Promise.all([chat.confirmPending(), chat.confirmPending(), memory.confirmPending(chat.id)]);
    expect(taken.filter(Boolean)).toHaveLength(1);
    await memory.close();
  });

  it("resolves on a new session (creating it) but not on another owner's", async () => {
    const memory = createMemory({ store: createMemoryStore({ ttlMs: 0 }) });
    const fresh = memory.session("11111111-1111-4111-8111-111111111111", { userId: "bob" });
    expect(await fresh.resolve("yes")).toEqual({ kind: "none" });
    await expect(memory.resolve(fresh.id, "yes", { userId: "mallory" })).rejects.toMatchObject({
      code: "session_not_found",
    });
    await memory.close();
  });

  it("never executes an expired confirmation", async () => {
    const memory = createMemory({ store: createMemoryStore({ ttlMs: 0 }) });
    const chat = await memory.startSession();
    const pending = await chat.setPendingConfirmation({
      action: "delete_task",
      args: { id: 1 },
      ttlMs: 1000,
    });
    const later = pending.expiresAt + 1;
    expect(await chat.resolve("yes", { now: later })).toMatchObject({ kind: "expired" });
    expect(await chat.confirmPending({ now: later })).toBeNull();
    expect((await chat.conversation()).pending).toBeUndefined();
    // The note no longer mentions it either.
    const fresh = await chat.setPendingConfirmation({ action: "delete_task", args: { id: 2 }, ttlMs: 1000 });
    const context = await chat.context({ now: fresh.expiresAt + 1 });
    expect(context.stateNote ?? "").not.toContain("Waiting");
    expect(await chat.confirmPending({ id: "someone-else" })).toBeNull();
    expect(await chat.confirmPending({ id: fresh.id, now: fresh.createdAt })).toEqual(fresh);
    await memory.close();
  });
});
