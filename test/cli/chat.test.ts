import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Memory } from "../../src/core/memory/memory.js";
import { createMemory } from "../../src/create-memory.js";
import { createUpstream } from "../../src/llm/openai-compatible.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";
import { driveChat } from "./_chat-driver.js";

let fake: FakeUpstream;
let memory: Memory;
const userId = "chat-tester";

beforeAll(async () => {
  fake = await startFakeUpstream();
});
afterAll(async () => {
  await fake.close();
});
beforeEach(() => {
  fake.requests.length = 0;
  fake.setReply((body) => ({ content: `echo: ${body.messages.at(-1).content}` }));
  memory = createMemory({ store: createMemoryStore({ ttlMs: 0 }), defaultUserId: userId });
});
afterEach(async () => {
  await memory.close();
});

const chatWith = (extra: { sessionId?: string; resume?: boolean } = {}) =>
  driveChat({
    memory,
    userId,
    upstream: createUpstream({ baseUrl: fake.url }),
    model: "fake-model",
    ...extra,
  });
const ID = /session ([0-9a-f-]{36})/;

describe("threadkeep chat", () => {
  it("prints a new session id, streams replies and sends the first message with the second", async () => {
    const d = chatWith();
    const banner = await d.waitFor(/\(new\)/);
    const id = ID.exec(banner)![1];
    expect(await d.say("My name is Ada.", /echo: My name is Ada\.\n/)).toBe("echo: My name is Ada.\n");
    await d.say("What is my name?", /echo: What is my name\?\n/);
    const second = fake.chatRequests()[1].body;
    expect(second.model).toBe("fake-model");
    expect(second.stream).toBe(true);
    expect(second.messages).toEqual([
      { role: "user", content: "My name is Ada." },
      { role: "assistant", content: "echo: My name is Ada." },
      { role: "user", content: "What is my name?" },
    ]);
    expect(await d.end()).toBe(0);
    expect((await memory.getMessages(id, { userId })).map((m) => m.content)).toEqual([
      "My name is Ada.",
      "echo: My name is Ada.",
      "What is my name?",
      "echo: What is my name?",
    ]);
  });

  it("lists, resumes and starts sessions", async () => {
    const d = chatWith();
    const first = ID.exec(await d.waitFor(/\(new\)/))![1];
    await d.say("Create a task: buy groceries", /echo: Create/);
    const second = ID.exec(await d.say("/newsession", /new session \S+/))![1];
    expect(second).not.toBe(first);
    await d.say("Plan a trip to Utrecht", /echo: Plan/);
    await d.say("and book a hotel", /echo: and book/);

    const listing = await d.say("/sessions", /TITLE[\s\S]*\n.*2 +\S+.*\n/);
    const rows = listing.trimEnd().split("\n").slice(1);
    expect(rows[0]).toMatch(new RegExp(`^\\*1 +${second} +4 +\\d+s ago +Plan a trip to Utrecht$`));
    expect(rows[1]).toMatch(new RegExp(`^ 2 +${first} +2 +\\d+s ago +Create a task: buy groceries$`));

    const resumed = await d.say("/resume 2", /#2 assistant: echo: Create a task: buy groceries\n/);
    expect(resumed).toContain(`resumed session ${first}`);
    await d.say("make it due tomorrow", /echo: make it/);
    expect(
      fake
        .chatRequests()
        .at(-1)!
        .body.messages.map((m: { content: string }) => m.content),
    ).toEqual(["Create a task: buy groceries", "echo: Create a task: buy groceries", "make it due tomorrow"]);
    await d.say(`/resume ${second}`, /resumed session/);
    expect(d.chat.sessionId()).toBe(second);
    expect(await d.end()).toBe(0);
  });

  it("searches, shows history and context, undoes and forks", async () => {
    const d = chatWith();
    await d.waitFor(/\(new\)/);
    await d.say("Buy oat milk", /echo: Buy oat milk\n/);
    await d.say("Also bread", /echo: Also bread\n/);
    const hits = await d.say("/search OAT", /\(this session\)\n[\s\S]*\(this session\)\n/);
    expect(hits).toMatch(/#2 assistant: echo: Buy oat milk \(this session\)\n/);
    expect(hits).toMatch(/#1 user: Buy oat milk \(this session\)\n/);
    expect(await d.say("/search nothing-like-this", /no messages/)).toBe('no messages contain "nothing-like-this"\n');

    expect(await d.say("/history 2", /#4.*\n/)).toBe("#3 user: Also bread\n#4 assistant: echo: Also bread\n");
    const context = await d.say("/context", /left out.*\n/);
    expect(context).toMatch(/^next turn sends 4 message\(s\) \+ your new one/);
    expect(context).toMatch(/ {2}user +Buy oat milk\n/);
    expect(context).toMatch(/left out: 0 stored message\(s\)/);

    expect(await d.say("/undo", /removed.*\n/)).toBe("removed the last turn (2 messages): Also bread\n");
    const original = d.chat.sessionId();
    const forked = await d.say("/fork", /forked.*\n/);
    const copy = /now in session (\S+)/.exec(forked)![1];
    expect(copy).not.toBe(original);
    await d.say("In the copy", /echo: In the copy\n/);
    expect((await memory.getMessages(original, { userId })).map((m) => m.content)).toEqual([
      "Buy oat milk",
      "echo: Buy oat milk",
    ]);
    expect((await memory.getMessages(copy, { userId })).map((m) => m.content)).toEqual([
      "Buy oat milk",
      "echo: Buy oat milk",
      "In the copy",
      "echo: In the copy",
    ]);
    expect(fake.chatRequests().at(-1)!.body.messages).toHaveLength(3);
    expect(await d.end()).toBe(0);
  });

  it("forgets a session only after a yes", async () => {
    const d = chatWith();
    const id = ID.exec(await d.waitFor(/\(new\)/))![1];
    await d.say("secret", /echo: secret\n/);
    expect(await d.say("/forget", /\[y\/N\] /)).toBe(`Delete session ${id}? [y/N] `);
    expect(await d.say("n", /kept\n/)).toBe("kept\n");
    await d.say("/forget", /\[y\/N\] /);
    expect(await d.say("yes", /new session \S+\n/)).toMatch(new RegExp(`^deleted ${id}; new session`));
    await expect(memory.getSession(id, { userId })).rejects.toMatchObject({ code: "session_not_found" });
    expect(await d.end()).toBe(0);
  });

  it("stops a reply on Ctrl-C and keeps what arrived, marked incomplete", async () => {
    fake.setReply(() => ({ content: "one two three four five six seven eight nine ten", delayMs: 40 }));
    const d = chatWith();
    const id = ID.exec(await d.waitFor(/\(new\)/))![1];
    const since = d.mark();
    d.send("count slowly");
    await d.waitFor(/one /, since);
    d.chat.interrupt();
    await d.waitFor(/\[stopped\]\n/, since);
    const [user, reply] = await memory.getMessages(id, { userId });
    expect(user.content).toBe("count slowly");
    expect(reply).toMatchObject({ role: "assistant", incomplete: true });
    expect((reply.content as string).length).toBeGreaterThan(0);
    expect("one two three four five six seven eight nine ten".startsWith(reply.content as string)).toBe(true);
    expect(reply.content).not.toBe("one two three four five six seven eight nine ten");
    // The chat goes on after a stopped reply.
    fake.setReply((body) => ({ content: `echo: ${body.messages.at(-1).content}` }));
    await d.say("still there?", /echo: still there\?\n/);
    expect(await d.end()).toBe(0);
  });

  it("summarises the session on /summary with the same model", async () => {
    const d = chatWith();
    const id = ID.exec(await d.waitFor(/\(new\)/))![1];
    await d.say("I am Ada", /echo: I am Ada\n/);
    await d.say("I live in Leiden", /echo: I live in Leiden\n/);
    fake.setReply((body) => ({ content: body.stream ? "streamed" : "Ada lives in Leiden." }));
    expect(await d.say("/summary", /Leiden\.\n/)).toBe("summary (messages 1–4):\nAda lives in Leiden.\n");
    const request = fake.chatRequests().at(-1)!.body;
    expect(request.stream).toBe(false);
    expect(request.messages.at(-1).content).toContain("[3] user: I live in Leiden");
    expect(await memory.listSummaries(id, { userId })).toMatchObject([
      { fromSeq: 1, toSeq: 4, content: "Ada lives in Leiden." },
    ]);
    expect(await d.say("/summary", /\n$/)).toBe("summary (messages 1–4):\nAda lives in Leiden.\n");
    expect(await d.end()).toBe(0);
  });

  it("/summary saves nothing into a session deleted and created again while the model summarised", async () => {
    const d = chatWith();
    const id = ID.exec(await d.waitFor(/\(new\)/))![1];
    await d.say("I am Ada", /echo: I am Ada\n/);
    await d.say("I live in Leiden", /echo: I live in Leiden\n/);
    // Another client replaces the session under the same id while the summary is being written.
    fake.setReply(async () => {
      await memory.deleteSession(id, { userId });
      await new Promise((resolve) => setTimeout(resolve, 5)); // a createdAt of its own
      await memory.addMessages(id, [{ role: "user", content: "a new conversation" }], { userId });
      return { content: "Ada lives in Leiden." };
    });
    await d.say("/summary", /nothing was saved/);
    expect(d.err()).toContain("the session was deleted or replaced while the summary was written");
    expect(await memory.listSummaries(id, { userId })).toEqual([]);
    expect((await memory.getMessages(id, { userId })).map((m) => m.content)).toEqual(["a new conversation"]);
    expect(await d.end()).toBe(1);
  });

  it("reports a failing model and stores nothing of that turn", async () => {
    fake.setReply(() => ({ status: 500, error: { message: "model overloaded" } }));
    const d = chatWith();
    const id = ID.exec(await d.waitFor(/\(new\)/))![1];
    await d.say("hello", /model overloaded/);
    expect(d.err()).toContain("The model failed, nothing was stored: Upstream answered 500: model overloaded");
    expect(await memory.getMessages(id, { userId }).catch(() => [])).toEqual([]);
    // Not even an empty session is left for a later --resume to pick up.
    await expect(memory.getSession(id, { userId })).rejects.toMatchObject({ code: "session_not_found" });
    expect(await d.end()).toBe(1);
  });

  it("answers an unknown slash command with help, and ends with exit code 2 when piped", async () => {
    const d = chatWith();
    await d.waitFor(/\(new\)/);
    expect(await d.say("/frobnicate now", /\/help/)).toBe('Unknown command "/frobnicate". Type /help for the list.\n');
    const help = await d.say("/help", /\/exit.*\n.*\n/);
    for (const name of [
      "sessions",
      "resume",
      "newsession",
      "history",
      "search",
      "context",
      "summary",
      "undo",
      "fork",
      "forget",
      "help",
      "exit",
    ]) {
      expect(help).toContain(`/${name}`);
    }
    d.send("//etc is a directory");
    await d.waitFor(/echo: \/etc is a directory\n/);
    d.send("/exit");
    expect(await d.chat.done).toBe(2);
  });

  it("without a model, says what to set and still browses stored sessions", async () => {
    const first = chatWith();
    const id = ID.exec(await first.waitFor(/\(new\)/))![1];
    await first.say("Remember the blue folder", /echo: Remember/);
    await first.end();

    const d = driveChat({ memory, userId });
    await d.waitFor(/No model configured/);
    expect(d.err()).toMatch(/--upstream <url> \(or THREADKEEP_UPSTREAM_URL\).*--model <name> \(or THREADKEEP_MODEL\)/);
    expect(await d.say("hello?", /No model configured/)).toMatch(/^No model configured/);
    expect(await d.say("/search blue folder", /\n$/)).toContain(`${id} #1 user: Remember the blue folder`);
    await d.say(`/resume ${id}`, /#2 assistant: echo: Remember the blue folder\n/);
    expect(await d.say("/history", /#2.*\n/)).toContain("#1 user: Remember the blue folder");
    expect(await d.end()).toBe(1);
  });
});

describe("threadkeep chat across restarts", () => {
  const dir = mkdtempSync(join(tmpdir(), "tk-chat-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("continues the most recent session with --resume", async () => {
    const open = () => createMemory({ store: `sqlite:${join(dir, "chat.db")}`, defaultUserId: userId });
    const before = open();
    const d1 = driveChat({
      memory: before,
      userId,
      upstream: createUpstream({ baseUrl: fake.url }),
      model: "m",
    });
    const id = ID.exec(await d1.waitFor(/\(new\)/))![1];
    await d1.say("I live in Leiden", /echo: I live in Leiden\n/);
    await d1.end();
    await before.close();

    const after = open();
    const d2 = driveChat({
      memory: after,
      userId,
      upstream: createUpstream({ baseUrl: fake.url }),
      model: "m",
      resume: true,
    });
    expect(await d2.waitFor(/\(resumed\)/)).toContain(`session ${id} (resumed)`);
    await d2.say("Where do I live?", /echo: Where/);
    expect(fake.chatRequests().at(-1)!.body.messages[0]).toEqual({
      role: "user",
      content: "I live in Leiden",
    });
    await d2.end();
    await after.close();
  });
});
