/**
 * A whole-history client that does not declare itself edits earlier messages in place and asks on:
 * the request carries, at their positions, an answer the model gave and other stored messages, which
 * proves it re-sends the whole conversation. The model (the fake upstream) then receives exactly the
 * client's conversation, the main line becomes the client's, what was replaced is kept in a branch
 * (`reason: "edit"`), and the reading is counted in /metrics. Through the real server, on SQLite,
 * PostgreSQL and Redis.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import type { FakeReply } from "../_fake-upstream.js";
import { serviceAvailable, TEST_POSTGRES_URL, TEST_REDIS_URL } from "../_services.js";
import { type Stack, startStack } from "./_stack.js";

type Msg = {
  role: "user" | "assistant" | "tool";
  content: string | null;
  tool_calls?: unknown[];
  tool_call_id?: string;
};

const dir = mkdtempSync(join(tmpdir(), "tk-in-place-"));
// A schema of its own: the shared database's default one may be at another branch's version.
const schema = `tk_test_${randomBytes(6).toString("hex")}`;
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  if ((await serviceAvailable("postgres")) !== true) return;
  const admin = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
});

const BACKENDS = [
  {
    name: "sqlite",
    store: () => `sqlite:${join(dir, "edits.db")}`,
    available: async (): Promise<true | string> => true,
  },
  {
    name: "postgres",
    store: () => createPostgresStore({ url: TEST_POSTGRES_URL, schema, poolSize: 2 }),
    available: () => serviceAvailable("postgres"),
  },
  { name: "redis", store: () => TEST_REDIS_URL, available: () => serviceAvailable("redis") },
];

const user = (content: string): Msg => ({ role: "user", content });
const assistant = (content: string): Msg => ({ role: "assistant", content });
const CALL = { id: "call_weather_1", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } };

/** What a person reading the chat compares: role, text, tool calls, tool call id. */
const shown = (m: Msg) => [
  m.role,
  m.content ?? "",
  JSON.stringify((m.tool_calls ?? []).map((c: any) => [c.function.name, c.function.arguments])),
  m.tool_call_id ?? "",
];

describe.each(BACKENDS)("in-place edits by an undeclared whole-history client on $name", ({ store, available }) => {
  let stack: Stack;
  let skip: string | undefined;

  beforeAll(async () => {
    const up = await available();
    if (up !== true) {
      skip = up;
      return;
    }
    stack = await startStack({ store: store() });
  });
  afterAll(async () => {
    await stack?.close();
  });

  /** Sends the client's whole conversation; returns what the model received (system messages aside) and its answer. */
  async function send(session: string, messages: Msg[], reply: FakeReply): Promise<{ received: Msg[]; answer: Msg }> {
    stack.fake.setReply(() => reply);
    const before = stack.fake.chatRequests().length;
    const response = await stack.request("POST", "/v1/chat/completions", {
      body: { model: "fake-model", messages: [{ role: "system", content: "Be brief." }, ...messages] },
      headers: { "X-Session-ID": session },
    });
    const body: any = await response.json();
    expect(response.status, JSON.stringify(body)).toBe(200);
    const requests = stack.fake.chatRequests();
    const received = requests[before].body.messages.filter((m: { role: string }) => m.role !== "system") as Msg[];
    const { content, tool_calls } = body.choices[0].message;
    return { received, answer: { role: "assistant", content: content ?? null, ...(tool_calls ? { tool_calls } : {}) } };
  }

  /** Two plain turns of a whole-history client: [q1, a1, q2, a2]. */
  async function twoTurns(session: string, q1: string, a1: string, q2: string, a2: string): Promise<Msg[]> {
    const first = await send(session, [user(q1)], { content: a1 });
    const view = [user(q1), first.answer, user(q2)];
    const second = await send(session, view, { content: a2 });
    return [...view, second.answer];
  }

  async function editReadings(): Promise<number> {
    const text = await (await stack.request("GET", "/metrics")).text();
    const line = text.split("\n").find((l) => l.startsWith('threadkeep_request_readings_total{reading="edit"}'));
    return line ? Number(line.split(" ").at(-1)) : 0;
  }

  /** The edit sends the model the client's conversation; the main line is the client's; the replaced messages are in an "edit" branch. */
  async function expectFollowed(
    session: string,
    request: Msg[],
    received: Msg[],
    answer: Msg,
    replaced: string[],
    atSeq: number,
  ) {
    expect(received.map(shown)).toEqual(request.map(shown));
    const line = (await stack.memory.getMessages(session)) as Msg[];
    expect(line.map(shown)).toEqual([...request, answer].map(shown));
    const branches = await stack.memory.listBranches(session);
    expect(branches).toHaveLength(1);
    expect(branches[0]).toMatchObject({ reason: "edit", atSeq });
    const kept = branches[0].messages.map((m) => m.content);
    for (const text of replaced) expect(kept).toContain(text);
  }

  it("follows an assistant answer corrected in place, and counts the reading", async (ctx) => {
    if (skip) ctx.skip(skip);
    const session = randomUUID();
    const view = await twoTurns(session, "What is 17 × 3?", "41", "And 17 × 4?", "68");
    const counted = await editReadings();
    const request = [view[0], assistant("51"), view[2], view[3], user("So what is the sum of both?")];
    const { received, answer } = await send(session, request, { content: "119" });
    await expectFollowed(session, request, received, answer, ["41"], 1);
    expect(await editReadings()).toBe(counted + 1);
    // The corrected line goes on as any other: the next turn continues it, with no new branch.
    const next = await send(session, [...request, answer, user("Thanks")], { content: "You're welcome." });
    expect(next.received.map(shown)).toEqual([...request, answer, user("Thanks")].map(shown));
    expect(await stack.memory.listBranches(session)).toHaveLength(1);
  });

  it("follows the first user message edited in place", async (ctx) => {
    if (skip) ctx.skip(skip);
    const session = randomUUID();
    const view = await twoTurns(
      session,
      "My name is Ada.",
      "Nice to meet you, Ada.",
      "I live in Oslo.",
      "Oslo is lovely.",
    );
    const request = [user("My name is Grace."), view[1], view[2], view[3], user("What is my name?")];
    const { received, answer } = await send(session, request, { content: "Grace." });
    expect(received.map((m) => m.content)).not.toContain("My name is Ada.");
    await expectFollowed(session, request, received, answer, ["My name is Ada."], 0);
  });

  it("follows several messages edited at once", async (ctx) => {
    if (skip) ctx.skip(skip);
    const session = randomUUID();
    const view = await twoTurns(
      session,
      "Plan a trip to Rome.",
      "Day 1: Colosseum.",
      "Make it two days.",
      "Day 2: Vatican.",
    );
    const third = await send(session, [...view, user("Add food tips.")], { content: "Try carbonara." });
    const whole = [...view, user("Add food tips."), third.answer];
    const request = [
      user("Plan a trip to Florence."),
      whole[1],
      user("Make it three days."),
      assistant("Day 2: Uffizi."),
      whole[4],
      whole[5],
      user("And the budget?"),
    ];
    const { received, answer } = await send(session, request, { content: "About 300 euros." });
    await expectFollowed(
      session,
      request,
      received,
      answer,
      ["Plan a trip to Rome.", "Make it two days.", "Day 2: Vatican."],
      0,
    );
  });

  it("follows an edit with tool calls in between", async (ctx) => {
    if (skip) ctx.skip(skip);
    const session = randomUUID();
    const q1 = user("What's the weather in Oslo?");
    const called = await send(session, [q1], { tool_calls: [CALL] });
    const result: Msg = { role: "tool", tool_call_id: CALL.id, content: "Rain, 8 °C" };
    const answered = await send(session, [q1, called.answer, result], { content: "Rainy, 8 degrees." });
    const view = [q1, called.answer, result, answered.answer, user("Do I need an umbrella?")];
    const second = await send(session, view, { content: "Yes." });
    // The question edited in place; the tool call, its result and the answers kept.
    const request = [
      user("What's the weather in Oslo tomorrow?"),
      called.answer,
      result,
      answered.answer,
      view[4],
      second.answer,
      user("And boots?"),
    ];
    const { received, answer } = await send(session, request, { content: "Yes, boots too." });
    await expectFollowed(session, request, received, answer, ["What's the weather in Oslo?"], 0);
    // The tool call keeps its pair on the main line.
    const line = await stack.memory.getMessages(session);
    expect(line[2]).toMatchObject({ role: "tool", tool_call_id: CALL.id });
  });

  it("stays non-destructive without a reproduced answer: a one-turn chat's edited question is appended", async (ctx) => {
    if (skip) ctx.skip(skip);
    const session = randomUUID();
    const first = await send(session, [user("My name is Ada.")], { content: "Hello Ada." });
    // Only the answer is reproduced: a thin client's own history could hold it, so nothing is replaced.
    await send(session, [user("My name is Grace."), first.answer, user("What is my name?")], { content: "Ada." });
    expect(((await stack.memory.getMessages(session)) as Msg[]).map((m) => m.content)).toEqual([
      "My name is Ada.",
      "Hello Ada.",
      "What is my name?",
      "Ada.",
    ]);
    expect(await stack.memory.listBranches(session)).toEqual([]);
  });
});
