/**
 * `--memories auto` through the proxy: the fake upstream answers the turns and, when asked with the
 * extraction prompt, a scripted extraction answer. A fact said in one session is in the context of
 * another session of the same user and never of another user's; contradictions replace, duplicates
 * add nothing, malformed or hostile answers store nothing and break no turn, the extraction never
 * holds a turn, temporary chats produce nothing, and a failed extraction is done after a restart.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { UserMemory, UserMemoryStore } from "../../src/core/store-types.js";
import type { FullStore } from "../../src/core/types.js";
import { EXTRACTION_PROMPT } from "../../src/server/user-memories/extraction.js";
import { EXTRACTION_STATE_KEY } from "../../src/server/user-memories/extractor.js";
import type { FakeReply } from "../_fake-upstream.js";
import { type Stack, startStack } from "./_stack.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";

const KEYS = { "key-ann": "ann", "key-bob": "bob" };
const isExtraction = (body: any) => body?.messages?.[0]?.content === EXTRACTION_PROMPT;

let stacks: Stack[] = [];
afterEach(async () => {
  await Promise.all(stacks.map((s) => s.close()));
  stacks = [];
});

/** A stack with memories on whose extraction answers come from `answer` (turns are echoed). */
async function start(
  answer: (body: any) => FakeReply | Promise<FakeReply>,
  store: FullStore = createMemoryStore(),
  extra = {},
) {
  const stack = await startStack({
    store,
    apiKeys: KEYS,
    memories: { mode: "auto", model: "memory-model", retryDelayMs: 10, resume: false },
    ...extra,
  });
  stacks.push(stack);
  stack.fake.setReply((body) => (isExtraction(body) ? answer(body) : {}));
  return { stack, store };
}

async function turn(stack: Stack, key: string, sessionId: string, text: string, headers: Record<string, string> = {}) {
  const res = await stack.request("POST", "/v1/chat/completions", {
    headers: { authorization: `Bearer ${key}`, "x-session-id": sessionId, ...headers },
    body: { model: "chat-model", messages: [{ role: "user", content: text }] },
  });
  expect(res.status).toBe(200);
  await res.json();
  return stack.fake
    .chatRequests()
    .filter((r) => !isExtraction(r.body))
    .at(-1)!.body.messages as { role: string; content: string }[];
}

const ops = (operations: unknown[]): FakeReply => ({ content: JSON.stringify({ operations }) });
const memoriesOf = async (store: UserMemoryStore, userId: string) =>
  (await store.listUserMemories(userId, { limit: 100 })).memories;
const noteOf = (messages: { role: string; content: string }[]) =>
  messages.find((m) => m.role === "system" && m.content.startsWith("What you know about the user"))?.content;
const idle = (stack: Stack) => stack.server.memoryExtractor!.idle();
const extractions = (stack: Stack, outcome: string) =>
  Number(
    new RegExp(`threadkeep_memory_extractions_total\\{outcome="${outcome}"\\} (\\d+)`).exec(
      stack.server.metrics.render(),
    )?.[1] ?? 0,
  );

describe("memories written by the model (--memories auto)", () => {
  it("a fact said in session A is in the context of session B of the same user, never of another user's", async () => {
    const { stack, store } = await start((body) =>
      body.messages[1].content.includes("I'm vegetarian") ? ops([{ op: "add", text: "Is vegetarian" }]) : ops([]),
    );
    const a = randomUUID();
    await turn(stack, "key-ann", a, "Remember that I'm vegetarian, please.");
    await idle(stack);
    const extraction = stack.fake.chatRequests().find((r) => isExtraction(r.body))!.body;
    expect(extraction.model).toBe("memory-model");
    expect(extraction.messages[1].content).toContain("user: Remember that I'm vegetarian");
    const [memory] = await memoriesOf(store, "ann");
    expect(memory).toMatchObject({ text: "Is vegetarian", source: { kind: "session", sessionId: a } });
    expect((memory.source as { seqs: number[] }).seqs).toEqual([1]);

    const sent = await turn(stack, "key-ann", randomUUID(), "What should I cook tonight?");
    expect(noteOf(sent)).toContain(`[${memory.id}] Is vegetarian`);
    const other = await turn(stack, "key-bob", randomUUID(), "What should I cook tonight?");
    expect(JSON.stringify(other)).not.toContain("vegetarian");
    expect(await memoriesOf(store, "bob")).toEqual([]);
  });

  it("a contradiction replaces the memory (old text in its history) and a duplicate adds nothing", async () => {
    let answer: FakeReply = ops([]);
    const { stack, store } = await start(() => answer);
    const session = randomUUID();
    answer = ops([{ op: "add", text: "Lives in Amsterdam" }]);
    await turn(stack, "key-ann", session, "I live in Amsterdam.");
    await idle(stack);
    answer = ops([{ op: "update", ref: "m1", text: "Lives in Utrecht", contradiction: true }]);
    await turn(stack, "key-ann", session, "We moved to Utrecht last month.");
    await idle(stack);
    // The same fact again, spelt differently, as an add and as an update of itself.
    answer = ops([
      { op: "add", text: "  lives in UTRECHT. " },
      { op: "update", ref: "m1", text: "Lives in Utrecht!" },
    ]);
    await turn(stack, "key-ann", session, "Utrecht is lovely.");
    await idle(stack);
    const memories = await memoriesOf(store, "ann");
    expect(memories).toHaveLength(1);
    expect(memories[0].text).toBe("Lives in Utrecht");
    expect(memories[0].history).toEqual([
      expect.objectContaining({ text: "Lives in Amsterdam", reason: "contradiction" }),
    ]);
    expect(stack.server.metrics.render()).toMatch(
      /threadkeep_memory_operations_total\{op="add",result="duplicate"\} 1/,
    );
    // Each turn's extraction saw only what followed the last one.
    const last = stack.fake
      .chatRequests()
      .filter((r) => isExtraction(r.body))
      .at(-1)!.body.messages[1].content;
    expect(last).toContain("[m1] Lives in Utrecht");
    expect(last).not.toContain("Amsterdam.");
  });

  it("malformed and hostile answers store nothing and break no turn", async () => {
    const victim = createMemoryStore();
    const bobs = await victim.addUserMemory({ userId: "bob", text: "Bob's secret" });
    const hostile: FakeReply[] = [
      { content: "Sure! Here are the memories: vegetarian" },
      { content: JSON.stringify({ operations: [{ op: "add", text: "x".repeat(10 * 1024 * 1024) }] }) },
      { content: JSON.stringify({ ops: [] }) },
      ops([
        { op: "delete", ref: bobs.id },
        { op: "update", ref: bobs.id, text: "pwned" },
        { op: "update", ref: "m99", text: "ghost" },
        { op: "drop_table" },
      ]),
      { status: 200, content: "" },
    ];
    let i = 0;
    const { stack, store } = await start(() => hostile[i++], victim);
    const session = randomUUID();
    for (const _ of hostile) {
      const sent = await turn(stack, "key-ann", session, `turn ${i}`);
      expect(sent.at(-1)!.content).toMatch(/^turn/);
      await idle(stack);
    }
    expect(i).toBe(hostile.length);
    expect(await memoriesOf(store, "ann")).toEqual([]);
    expect(await store.getUserMemory("bob", bobs.id)).toMatchObject({ text: "Bob's secret", history: [] });
    expect(extractions(stack, "malformed")).toBe(4);
    expect(stack.server.metrics.render()).toMatch(/threadkeep_memory_operations_total\{op="any",result="rejected"\} 4/);
    // Malformed answers are not asked again: the marker moved past each turn.
    expect((await stack.memory.getState(session, { userId: "ann" })).data[EXTRACTION_STATE_KEY]).toEqual({ toSeq: 10 });
  });

  it("never holds a turn: replies come back while a slow memory model is still thinking", async () => {
    let release!: () => void;
    const thinking = new Promise<void>((resolve) => (release = resolve));
    const { stack, store } = await start(async () => {
      await thinking;
      return ops([{ op: "add", text: "Likes tea" }]);
    });
    const session = randomUUID();
    await turn(stack, "key-ann", session, "I like tea.");
    await turn(stack, "key-ann", session, "And biscuits.");
    expect(stack.fake.chatRequests().filter((r) => isExtraction(r.body))).toHaveLength(1);
    expect(await memoriesOf(store, "ann")).toEqual([]);
    release();
    await idle(stack);
    expect((await memoriesOf(store, "ann")).map((m) => m.text)).toEqual(["Likes tea"]);
    // The second turn, committed while the first was extracted, was extracted after it.
    expect(stack.fake.chatRequests().filter((r) => isExtraction(r.body))).toHaveLength(2);
  });

  it("temporary chats produce no memories", async () => {
    const { stack, store } = await start(() => ops([{ op: "add", text: "Is vegetarian" }]));
    await turn(stack, "key-ann", "local:Xk3_pq9aAAAB", "I'm vegetarian.");
    await idle(stack);
    expect(stack.fake.chatRequests().filter((r) => isExtraction(r.body))).toHaveLength(0);
    expect(await memoriesOf(store, "ann")).toEqual([]);
  });

  it("a failed extraction is retried, and what a restart interrupted is extracted at the next start", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tk-memories-"));
    const path = join(dir, "threadkeep.db");
    try {
      const store = createSqliteStore({ path });
      const first = await start(() => ({ status: 503, error: { message: "busy" } }), store);
      const session = randomUUID();
      await turn(first.stack, "key-ann", session, "My dog Rex needs a walk.");
      await idle(first.stack);
      expect(extractions(first.stack, "retry")).toBe(2);
      expect(extractions(first.stack, "failed")).toBe(1);
      await first.stack.close();
      stacks = [];

      // The same database and memories, a new process.
      const reopened = createSqliteStore({ path });
      const second = await start(() => ops([{ op: "add", text: "Has a dog called Rex" }]), reopened, {
        memories: { mode: "auto", model: "memory-model", retryDelayMs: 10 },
      });
      await expect
        .poll(async () => (await memoriesOf(reopened, "ann")).map((m) => m.text))
        .toEqual(["Has a dog called Rex"]);
      expect(
        second.stack.fake.chatRequests().filter((r) => isExtraction(r.body))[0].body.messages[1].content,
      ).toContain("My dog Rex");
    } finally {
      await Promise.all(stacks.map((s) => s.close()));
      stacks = [];
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("memories in the context", () => {
  async function seeded(texts: string[], extra = {}) {
    const store = createMemoryStore();
    const memories: UserMemory[] = [];
    for (const [i, text] of texts.entries())
      memories.push(await store.addUserMemory({ userId: "ann", text, createdAt: 1000 + i }));
    const stack = await startStack({ store, apiKeys: KEYS, ...extra });
    stacks.push(stack);
    return { stack, store, memories };
  }
  const context = async (stack: Stack, session: string, input: string) => {
    const res = await stack.request("GET", `/v1/sessions/${session}/context?message=${encodeURIComponent(input)}`, {
      headers: { authorization: "Bearer key-ann" },
    });
    expect(res.status).toBe(200);
    return (await res.json()) as any;
  };

  it("brings all memories while they fit, says why, and a deleted one is gone from later contexts", async () => {
    const { stack, store, memories } = await seeded(["Is vegetarian", "Manager is Sam"]);
    const session = randomUUID();
    const sent = await turn(stack, "key-ann", session, "hello");
    expect(noteOf(sent)).toBe(
      "What you know about the user from earlier conversations (memories, id in brackets; the user can see and correct them):\n" +
        `- [${memories[0].id}] Is vegetarian\n- [${memories[1].id}] Manager is Sam`,
    );
    const shown = await context(stack, session, "hello");
    expect(shown.memories.included).toEqual([
      { id: memories[0].id, reason: "all" },
      { id: memories[1].id, reason: "all" },
    ]);
    await store.deleteUserMemory("ann", memories[0].id);
    expect(noteOf(await turn(stack, "key-ann", session, "again"))).not.toContain("vegetarian");
  });

  it("when they do not fit the share: pinned first, then the most related to the new message", async () => {
    const filler = Array.from(
      { length: 40 },
      (_, i) => `Collects stamps from country number ${i} and keeps them in album ${i}`,
    );
    const { stack, memories } = await seeded([...filler, "Is allergic to peanuts", "Manager is Sam"], {
      memoryOptions: { tokenBudget: 4000 },
    });
    const session = randomUUID();
    await turn(stack, "key-ann", session, "hello");
    const pinned = memories.find((m) => m.text === "Manager is Sam")!;
    const put = await stack.request("PUT", `/v1/sessions/${session}/preferences`, {
      headers: { authorization: "Bearer key-ann" },
      body: { memoryIds: [pinned.id], sticky: true },
    });
    expect(put.status).toBe(200);
    const shown = await context(stack, session, "Can you suggest a snack without peanuts?");
    expect(shown.memories.budget).toBe(400);
    expect(shown.memories.tokens).toBeLessThanOrEqual(400);
    expect(shown.memories.omitted).toBeGreaterThan(0);
    const reasons = Object.fromEntries(shown.memories.included.map((m: any) => [m.id, m.reason]));
    expect(reasons[pinned.id]).toBe("pinned");
    expect(reasons[memories.find((m) => m.text === "Is allergic to peanuts")!.id]).toBe("related");
  });

  it("a preference turns them off for a session", async () => {
    const { stack } = await seeded(["Is vegetarian"]);
    const session = randomUUID();
    expect(noteOf(await turn(stack, "key-ann", session, "hello"))).toContain("Is vegetarian");
    await stack.request("PUT", `/v1/sessions/${session}/preferences`, {
      headers: { authorization: "Bearer key-ann" },
      body: { memories: false, sticky: true },
    });
    expect(noteOf(await turn(stack, "key-ann", session, "hello"))).toBeUndefined();
    expect(noteOf(await turn(stack, "key-ann", randomUUID(), "hello"))).toContain("Is vegetarian");
  });
});
