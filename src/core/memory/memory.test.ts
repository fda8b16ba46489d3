import { describe, expect, it } from "vitest";
import { createMemoryStore } from "../../stores/in-process/index.js";
import { createMemory } from "../../create-memory.js";
import { newSessionId } from "../ids.js";

const memoryOn = (options: Parameters<typeof createMemory>[0] extends infer O ? Partial<O> : never = {}) =>
  createMemory({ store: createMemoryStore({ ttlMs: 0 }), ...options });

describe("Memory", () => {
  it("starts a session, keeps messages and reads them back", async () => {
    const memory = memoryOn();
    const chat = await memory.startSession({ userId: "alice" });
    await chat.addMessage({ role: "user", content: "Create a task: buy groceries" });
    await chat.addMessages([{ role: "assistant", content: "Created task 42." }]);
    const messages = await chat.getMessages();
    expect(messages.map((m) => [m.seq, m.role, m.content])).toEqual([
      [1, "user", "Create a task: buy groceries"],
      [2, "assistant", "Created task 42."],
    ]);
    expect((await chat.info()).userId).toBe("alice");
    await memory.close();
  });

  it("creates an unknown well-formed id for its caller and hides it from everyone else", async () => {
    const memory = memoryOn();
    const id = newSessionId();
    await memory.addMessages(id, [{ role: "user", content: "mine" }], { userId: "alice" });
    await expect(memory.getMessages(id, { userId: "bob" })).rejects.toMatchObject({ code: "session_not_found" });
    await expect(memory.addMessages(id, [{ role: "user", content: "x" }], { userId: "bob" })).rejects.toMatchObject({
      code: "session_not_found",
    });
    await expect(memory.deleteSession(id, { userId: "bob" })).rejects.toMatchObject({ code: "session_not_found" });
    await expect(memory.search("mine", { userId: "bob", sessionId: id })).rejects.toMatchObject({
      code: "session_not_found",
    });
    expect(await memory.search("mine", { userId: "bob" })).toEqual([]);
    expect((await memory.listSessions({ userId: "bob" })).sessions).toEqual([]);
    expect((await memory.getMessages(id, { userId: "alice" })).map((m) => m.content)).toEqual(["mine"]);
    await memory.close();
  });

  it("rejects malformed ids and bad messages with codes, storing nothing", async () => {
    const memory = memoryOn();
    expect(() => memory.session("nope")).toThrow(expect.objectContaining({ code: "invalid_session_id" }));
    await expect(memory.addMessages("../etc", [{ role: "user", content: "x" }])).rejects.toMatchObject({
      code: "invalid_session_id",
    });
    const id = newSessionId();
    await expect(memory.addMessages(id, [{ role: "robot", content: "x" } as never])).rejects.toMatchObject({
      code: "invalid_message",
    });
    await expect(memory.getSession(id)).rejects.toMatchObject({ code: "session_not_found" });
    await memory.close();
  });

  it("applies the message cap", async () => {
    const memory = memoryOn({ maxMessages: 10 });
    const chat = await memory.startSession();
    for (let i = 0; i < 25; i++) await chat.addMessage({ role: "user", content: `m${i}` });
    const all = await chat.getMessages();
    expect(all).toHaveLength(10);
    expect(all[0].content).toBe("m15");
    await memory.close();
  });

  it("undoes the last turn, including its tool calls", async () => {
    const memory = memoryOn();
    const chat = await memory.startSession();
    await chat.addMessages([
      { role: "user", content: "first" },
      { role: "assistant", content: "one" },
      { role: "user", content: "list tasks" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "ls", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "c1", content: "[]" },
      { role: "assistant", content: "none" },
    ]);
    const removed = await chat.undoTurn();
    expect(removed.map((m) => m.seq)).toEqual([3, 4, 5, 6]);
    expect((await chat.getMessages()).map((m) => m.content)).toEqual(["first", "one"]);
    expect((await chat.addMessage({ role: "user", content: "again" })).seq).toBe(3);
    await memory.close();
  });

  it("forks at a seq, copying messages, summaries and state", async () => {
    const memory = memoryOn();
    const chat = await memory.startSession({ userId: "alice" });
    await chat.addMessages([1, 2, 3, 4].map((n) => ({ role: "user" as const, content: `m${n}` })));
    await (await memory.store()).saveSummary(chat.id, { fromSeq: 1, toSeq: 2, content: "early part" });
    await chat.updateState((data) => ({ ...data, entities: ["task:42"] }));
    const fork = await chat.fork({ atSeq: 3 });
    expect(fork.id).not.toBe(chat.id);
    expect((await fork.getMessages()).map((m) => m.content)).toEqual(["m1", "m2", "m3"]);
    expect((await memory.listSummaries(fork.id, { userId: "alice" }))[0].content).toBe("early part");
    expect((await fork.getState()).data).toEqual({ entities: ["task:42"] });
    expect((await fork.info()).metadata.forkedFrom).toEqual({ sessionId: chat.id, atSeq: 3 });
    await fork.addMessage({ role: "user", content: "diverge" });
    expect(await chat.getMessages()).toHaveLength(4);
    await memory.close();
  });

  it("clears a session but keeps its id and owner", async () => {
    const memory = memoryOn();
    const chat = await memory.startSession({ userId: "carol", metadata: { title: "t" } });
    await chat.addMessage({ role: "user", content: "x" });
    await chat.updateState(() => ({ a: 1 }));
    await chat.clear();
    expect(await chat.getMessages()).toEqual([]);
    expect((await chat.getState()).version).toBe(0);
    expect((await chat.info()).metadata).toEqual({ title: "t" });
    await memory.close();
  });

  it("updates state by compare-and-set, retrying concurrent writers", async () => {
    const memory = memoryOn();
    const chat = await memory.startSession();
    await Promise.all(Array.from({ length: 10 }, () => chat.updateState((d) => ({ n: ((d.n as number) ?? 0) + 1 }))));
    expect((await chat.getState()).data.n).toBe(10);
    await expect(memory.updateState(chat.id, () => ({}), { expectedVersion: 3 })).rejects.toMatchObject({
      code: "state_conflict",
    });
    await memory.close();
  });

  it("treats a session inactive past the TTL as gone, and expires in bulk", async () => {
    const store = createMemoryStore({ ttlMs: 0 });
    const memory = createMemory({ store, ttlMs: 60_000 });
    const old = newSessionId();
    await store.createSession({ id: old, userId: "default", lastActivityAt: Date.now() - 120_000 });
    await store.appendMessages(old, [{ role: "user", content: "stale" }]);
    await store.touchSession(old, Date.now() - 120_000);
    expect(await memory.getMessages(old).catch((e) => e.code)).toBe("session_not_found");
    // A write to it starts a fresh session: the stale history is gone.
    await memory.addMessages(old, [{ role: "user", content: "fresh" }]);
    expect((await memory.getMessages(old)).map((m) => m.content)).toEqual(["fresh"]);
    const other = newSessionId();
    await store.createSession({ id: other, userId: "default", lastActivityAt: Date.now() - 120_000 });
    expect(await memory.expire()).toEqual([other]);
    await memory.close();
  });

  it("runs turns of one session one at a time, in arrival order", async () => {
    const memory = memoryOn();
    const chat = await memory.startSession();
    const log: string[] = [];
    await Promise.all(
      [0, 1, 2, 3, 4].map((i) =>
        memory.runTurn(chat.id, async (lease) => {
          log.push(`start ${i}`);
          await new Promise((r) => setTimeout(r, 5));
          await memory.addMessages(chat.id, [{ role: "user", content: `q${i}` }], { fence: lease.fence });
          log.push(`end ${i}`);
        }),
      ),
    );
    expect(log).toEqual([0, 1, 2, 3, 4].flatMap((i) => [`start ${i}`, `end ${i}`]));
    await memory.close();
  });

  it("reads a session that does not exist yet as empty without creating it, and refuses another owner's", async () => {
    const memory = memoryOn();
    const id = newSessionId();
    const input = [{ role: "user" as const, content: "first words" }];
    const context = await memory.buildContext(id, { userId: "alice", input });
    expect(context.messages).toEqual(input);
    await expect(memory.getSession(id, { userId: "alice" })).rejects.toMatchObject({ code: "session_not_found" });
    await memory.addMessages(id, input, { userId: "alice" });
    await expect(memory.buildContext(id, { userId: "bob", input })).rejects.toMatchObject({
      code: "session_not_found",
    });
    await memory.close();
  });

  it("opens a store from a URL", async () => {
    const memory = createMemory({ store: "memory:" });
    expect(memory.settings.ttlMs).toBe(30 * 60_000);
    const chat = await memory.startSession();
    await chat.addMessage({ role: "user", content: "hello" });
    expect(await chat.getMessages()).toHaveLength(1);
    await memory.close();
    expect(() => createMemory({} as never)).toThrow(/needs a store/);
  });
});
