/**
 * The OpenAI Agents SDK's session contract, held against `ThreadkeepSession` on one store. Modelled on
 * the SDK's tests of its own reference session (`packages/agents-core/test/memorySession.test.ts` and
 * `historyMutations.test.ts` in openai/openai-agents-js) and on the contract its `session.ts` documents
 * (written against `@openai/agents` 0.14.3, the newest whose dependencies allow Node 20): items come
 * back exactly and as copies, `getItems(limit)` is the newest `limit` in order, `popItem` and
 * `clearSession`, history mutations, and idempotent history transactions that reject a conflict or bad
 * input before any change and without using up the operation id.
 */
import { randomUUID } from "node:crypto";
import {
  Agent,
  type AgentInputItem,
  isSessionHistoryRewriteAwareSession,
  isSessionHistoryTransactionAwareSession,
  MemorySession,
  OpenAIChatCompletionsModel,
  Runner,
  type SessionHistoryTransactionArgs,
  tool,
} from "@openai/agents";
import OpenAI from "openai";
import { expect, it } from "vitest";
import { z } from "zod";
import { ThreadkeepSession } from "../../src/adapters/agents.js";
import type { Memory } from "../../src/core/memory/memory.js";
import type { FakeUpstream } from "../_fake-upstream.js";

const user = (text: string): AgentInputItem => ({ role: "user", content: [{ type: "input_text", text }] });
const call = (callId: string, args: string, id?: string): Extract<AgentInputItem, { type: "function_call" }> => ({
  type: "function_call",
  ...(id ? { id } : {}),
  callId,
  name: "lookup",
  arguments: args,
  status: "completed",
});

/** Every kind of item a run stores: messages of each role and shape, tool calls and results, reasoning, hosted calls. */
export const AGENT_ITEMS: AgentInputItem[] = [
  { role: "system", content: "Be terse." },
  { role: "user", content: "hello" },
  {
    type: "message",
    role: "user",
    content: [
      { type: "input_text", text: "look" },
      { type: "input_image", image: "https://example.invalid/a.png", detail: "low" },
    ],
  },
  {
    role: "user",
    content: [{ type: "input_file", file: "https://example.invalid/a.pdf", filename: "a.pdf" }],
    providerData: { origin: "upload" },
  },
  {
    type: "reasoning",
    id: "rs_1",
    content: [{ type: "input_text", text: "thinking" }],
    providerData: { encrypted: "x" },
  },
  {
    type: "message",
    role: "assistant",
    id: "msg_1",
    status: "completed",
    content: [{ type: "output_text", text: "Checking.", providerData: { annotations: [] } }],
  },
  { type: "message", role: "assistant", status: "completed", content: [{ type: "refusal", refusal: "No." }] },
  call("call_1", '{"q":1}', "fc_1"),
  call("call_2", '{"q":2}'),
  {
    type: "function_call_result",
    callId: "call_1",
    name: "lookup",
    status: "completed",
    output: { type: "text", text: "found" },
  },
  { type: "function_call_result", callId: "call_2", name: "lookup", status: "completed", output: "plain" },
  {
    type: "function_call_result",
    callId: "call_3",
    name: "chart",
    status: "completed",
    output: [
      { type: "input_image", image: "data:image/png;base64,AAAA" },
      { type: "input_text", text: "a chart" },
    ],
  },
  { type: "hosted_tool_call", id: "ws_1", name: "web_search_call", status: "completed", providerData: { query: "x" } },
  {
    type: "computer_call",
    id: "cu_1",
    callId: "cc_1",
    status: "completed",
    action: { type: "click", x: 1, y: 2, button: "left" },
  },
  {
    type: "message",
    role: "assistant",
    status: "in_progress",
    content: [{ type: "output_text", text: "Done, unicode ✓ \u0000 \ud83d\ude00." }],
  },
];

type Holder = { readonly memory: Memory };

/** The Agents SDK session contract on the memory `stack` holds; `upstream` is the fake model a Runner talks to. */
export function agentsSessionContract(stack: Holder, upstream: { readonly fake: FakeUpstream }): void {
  const session = (initial: AgentInputItem[] = []) => {
    const s = new ThreadkeepSession({ memory: stack.memory, sessionId: randomUUID(), userId: "contract" });
    return initial.length ? s.addItems(initial).then(() => s) : Promise.resolve(s);
  };
  const apply = (s: ThreadkeepSession, args: SessionHistoryTransactionArgs) => s.applyHistoryTransaction(args);
  const append = (operationId: string, items: AgentInputItem[]) => ({
    operationId,
    transaction: { type: "append_items" as const, items },
  });

  it("takes a Runner's guardrail-blocked turn and its accepted replacement as the SDK's own MemorySession does", async () => {
    // A run whose output guardrail trips after a tool ran persists the turn with an append_items
    // transaction; resuming it, accepted, replaces the suffix (replace_suffix): the SDK's real path.
    const fake = upstream.fake;
    fake.setReply((body) =>
      body.messages.at(-1).role === "tool"
        ? { content: `It is ${body.messages.at(-1).content}.` }
        : {
            tool_calls: [
              { id: "call_w1", type: "function", function: { name: "get_weather", arguments: '{"city":"Utrecht"}' } },
            ],
          },
    );
    const model = new OpenAIChatCompletionsModel(
      new OpenAI({ baseURL: fake.url, apiKey: "sk-test", maxRetries: 0 }),
      "fake-model",
    );
    const weather = tool({
      name: "get_weather",
      description: "The weather",
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => `Sunny in ${city}`,
    });
    let blocked = true;
    const agent = new Agent({
      name: "Assistant",
      instructions: "Be terse.",
      model,
      tools: [weather],
      outputGuardrails: [{ name: "review", execute: async () => ({ tripwireTriggered: blocked, outputInfo: {} }) }],
    });
    const runner = new Runner({ tracingDisabled: true });
    const scenario = async (s: MemorySession | ThreadkeepSession) => {
      const transactions: string[] = [];
      const apply = s.applyHistoryTransaction.bind(s);
      s.applyHistoryTransaction = (args) => (transactions.push(args.transaction.type), apply(args));
      blocked = true;
      const tripped = await runner.run(agent, "Weather in Utrecht?", { session: s }).then(
        () => null,
        (e: unknown) => e as { state?: unknown },
      );
      expect(tripped?.constructor.name).toBe("OutputGuardrailTripwireTriggered");
      blocked = false;
      const resumed = await runner.run(agent, tripped!.state as never, { session: s });
      expect(resumed.finalOutput).toBe("It is Sunny in Utrecht.");
      // The model's own ids differ from run to run; everything else must be the same.
      return { transactions, items: (await s.getItems()).map(({ id: _id, ...rest }: { id?: unknown }) => rest) };
    };
    const reference = await scenario(new MemorySession());
    const s = await session();
    const mine = await scenario(s);
    expect(reference.transactions).toEqual(["append_items", "replace_suffix"]);
    expect(mine).toEqual(reference);
    fake.setReply(() => ({ content: "Noted." }));
    await runner.run(agent, "Thanks", { session: s });
    expect((fake.chatRequests().at(-1)!.body.messages as { role: string }[]).map((m) => m.role)).toEqual([
      "system",
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
    ]);
  });

  it("says it supports history transactions and mutations, like the SDK's MemorySession", async () => {
    const s = await session();
    expect(isSessionHistoryTransactionAwareSession(s)).toBe(
      isSessionHistoryTransactionAwareSession(new MemorySession()),
    );
    expect(isSessionHistoryRewriteAwareSession(s)).toBe(isSessionHistoryRewriteAwareSession(new MemorySession()));
    expect(isSessionHistoryRewriteAwareSession(s)).toBe(true);
  });

  it("gives back every kind of item exactly, in order, under a stable session id", async () => {
    const s = await session();
    const id = await s.getSessionId();
    expect(await s.getItems()).toEqual([]);
    await s.addItems([]);
    await s.addItems(AGENT_ITEMS.slice(0, 5));
    await s.addItems(AGENT_ITEMS.slice(5));
    expect(await s.getItems()).toEqual(AGENT_ITEMS);
    expect(await s.getSessionId()).toBe(id);
    // A second handle on the same session id reads the same history.
    expect(await new ThreadkeepSession({ memory: stack.memory, sessionId: id, userId: "contract" }).getItems()).toEqual(
      AGENT_ITEMS,
    );
  });

  it("keeps binary data a tool returned (Uint8Array) as bytes", async () => {
    const bytes = new Uint8Array([0, 1, 2, 254, 255]);
    const result: AgentInputItem = {
      type: "function_call_result",
      callId: "call_bin",
      name: "render",
      status: "completed",
      output: { type: "image", image: { data: bytes, mediaType: "image/png" } },
    };
    const s = await session([result]);
    const [read] = await s.getItems();
    expect(read).toEqual(result);
    expect((read as { output: { image: { data: unknown } } }).output.image.data).toBeInstanceOf(Uint8Array);
  });

  it("returns the newest `limit` items in order for every limit, and none for 0 or less", async () => {
    const s = await session(AGENT_ITEMS);
    for (let limit = 1; limit <= AGENT_ITEMS.length + 2; limit++)
      expect(await s.getItems(limit)).toEqual(AGENT_ITEMS.slice(-limit));
    expect(await s.getItems(0)).toEqual([]);
    expect(await s.getItems(-1)).toEqual([]);
  });

  it("pops the newest item, one at a time, down to undefined", async () => {
    const s = await session(AGENT_ITEMS);
    for (let i = AGENT_ITEMS.length - 1; i >= 0; i--) {
      expect(await s.popItem()).toEqual(AGENT_ITEMS[i]);
      expect(await s.getItems()).toEqual(AGENT_ITEMS.slice(0, i));
    }
    expect(await s.popItem()).toBeUndefined();
  });

  it("clears the session; a cleared or never written session reads empty and pops nothing", async () => {
    const s = await session([user("hello"), user("one"), user("two")]);
    await s.clearSession();
    expect(await s.getItems()).toEqual([]);
    expect(await s.getItems(3)).toEqual([]);
    expect(await s.popItem()).toBeUndefined();
    const fresh = await session();
    await fresh.clearSession();
    expect(await fresh.popItem()).toBeUndefined();
    await s.addItems([user("again")]);
    expect(await s.getItems()).toEqual([user("again")]);
  });

  it("hands out copies: changing what it returned or was given changes nothing stored", async () => {
    const start = user("start");
    const s = await session([start]);
    (start as { content: unknown }).content = "mutated";
    const items = await s.getItems();
    (items[0] as { content: unknown }).content = "mutated";
    expect(await s.getItems()).toEqual([user("start")]);
    await s.addItems([user("next")]);
    const popped = await s.popItem();
    expect(popped).toEqual(user("next"));
    (popped as { content: unknown }).content = "mutated";
    expect(await s.getItems()).toEqual([user("start")]);
  });

  it("replaces a function call by call id: the first in place, later duplicates dropped (applyHistoryMutations)", async () => {
    const s = await session([
      user("start"),
      call("call-1", '{"ok":false}', "old-1"),
      call("call-2", "{}"),
      call("call-1", '{"duplicate":true}', "old-2"),
    ]);
    const replacement = call("call-1", '{"ok":true}', "new");
    await s.applyHistoryMutations({ mutations: [{ type: "replace_function_call", callId: "call-1", replacement }] });
    expect(await s.getItems()).toEqual([user("start"), replacement, call("call-2", "{}")]);
    // No mutation, or a call id not in the history, leaves it as it is.
    await s.applyHistoryMutations({ mutations: [] });
    await s.applyHistoryMutations({
      mutations: [{ type: "replace_function_call", callId: "call-9", replacement: call("call-9", "{}") }],
    });
    expect(await s.getItems()).toEqual([user("start"), replacement, call("call-2", "{}")]);
  });

  it("applies a history mutation as the SDK's own applySessionHistoryMutations does, on a mixed history", async () => {
    const reference = new MemorySession({ initialItems: AGENT_ITEMS });
    const s = await session(AGENT_ITEMS);
    const args = {
      mutations: [
        {
          type: "replace_function_call" as const,
          callId: "call_2",
          replacement: call("call_2", '{"q":"fixed"}', "fc_new"),
        },
      ],
    };
    await reference.applyHistoryMutations(args);
    await s.applyHistoryMutations(args);
    expect(await s.getItems()).toEqual(await reference.getItems());
  });

  it("applies an append transaction once per operation id, even after later writes", async () => {
    const s = await session([user("start")]);
    const committed = user("committed");
    await apply(s, append("operation-append-1", [committed]));
    (committed as { content: unknown }).content = "mutated";
    await s.addItems([user("later")]);
    await apply(s, append("operation-append-1", [user("committed")]));
    expect(await s.getItems()).toEqual([user("start"), user("committed"), user("later")]);
  });

  it("replaces an exact suffix once per operation id, even after later writes", async () => {
    const s = await session([user("start"), user("blocked")]);
    const replace = {
      operationId: "operation-replace-1",
      transaction: {
        type: "replace_suffix" as const,
        expectedSuffix: [user("blocked")],
        replacement: [user("accepted")],
      },
    };
    await apply(s, replace);
    await s.addItems([user("later")]);
    await apply(s, replace);
    expect(await s.getItems()).toEqual([user("start"), user("accepted"), user("later")]);
  });

  it("replaces a suffix that starts inside a message holding several items, and the whole history", async () => {
    const s = await session(AGENT_ITEMS);
    const suffix = AGENT_ITEMS.slice(8);
    await apply(s, {
      operationId: "mid-message",
      transaction: { type: "replace_suffix", expectedSuffix: suffix, replacement: [user("new tail")] },
    });
    expect(await s.getItems()).toEqual([...AGENT_ITEMS.slice(0, 8), user("new tail")]);
    const all = await s.getItems();
    await apply(s, {
      operationId: "everything",
      transaction: { type: "replace_suffix", expectedSuffix: all, replacement: [] },
    });
    expect(await s.getItems()).toEqual([]);
    await apply(s, {
      operationId: "on-empty",
      transaction: { type: "replace_suffix", expectedSuffix: [], replacement: [user("first")] },
    });
    expect(await s.getItems()).toEqual([user("first")]);
  });

  it("rejects a suffix that does not match without changing history or using up the operation id", async () => {
    const s = await session([user("start")]);
    const op = "operation-replace-after-conflict";
    await expect(
      apply(s, {
        operationId: op,
        transaction: { type: "replace_suffix", expectedSuffix: [user("different")], replacement: [user("accepted")] },
      }),
    ).rejects.toMatchObject({ code: "history_conflict" });
    await expect(
      apply(s, {
        operationId: op,
        transaction: { type: "replace_suffix", expectedSuffix: [user("start"), user("start")], replacement: [] },
      }),
    ).rejects.toMatchObject({ code: "history_conflict" });
    expect(await s.getItems()).toEqual([user("start")]);
    await apply(s, {
      operationId: op,
      transaction: { type: "replace_suffix", expectedSuffix: [user("start")], replacement: [user("accepted")] },
    });
    expect(await s.getItems()).toEqual([user("accepted")]);
  });

  it("rejects an operation id used again for another transaction, changing nothing", async () => {
    const s = await session();
    await apply(s, append("operation-conflict", [user("first")]));
    await expect(apply(s, append("operation-conflict", [user("second")]))).rejects.toMatchObject({
      code: "operation_conflict",
    });
    await expect(
      apply(s, {
        operationId: "operation-conflict",
        transaction: { type: "replace_suffix", expectedSuffix: [user("first")], replacement: [] },
      }),
    ).rejects.toMatchObject({ code: "operation_conflict" });
    const replace = { type: "replace_suffix" as const, expectedSuffix: [user("first")], replacement: [user("second")] };
    await apply(s, { operationId: "operation-replace", transaction: replace });
    await expect(apply(s, append("operation-replace", [user("second")]))).rejects.toMatchObject({
      code: "operation_conflict",
    });
    expect(await s.getItems()).toEqual([user("second")]);
  });

  it("records an empty append and an empty replacement, so their ids cannot be reused", async () => {
    const s = await session();
    await apply(s, append("operation-empty", []));
    await expect(apply(s, append("operation-empty", [user("unexpected")]))).rejects.toMatchObject({
      code: "operation_conflict",
    });
    await apply(s, append("operation-empty", []));
    expect(await s.getItems()).toEqual([]);
    await s.addItems([user("gone")]);
    const drop = {
      operationId: "operation-drop",
      transaction: { type: "replace_suffix" as const, expectedSuffix: [user("gone")], replacement: [] },
    };
    await apply(s, drop);
    await s.addItems([user("kept")]);
    await apply(s, drop);
    expect(await s.getItems()).toEqual([user("kept")]);
    await expect(apply(s, append("operation-drop", [user("x")]))).rejects.toMatchObject({ code: "operation_conflict" });
  });

  it("forgets operation ids when the session is cleared", async () => {
    const s = await session();
    const args = append("operation-after-reset", [user("committed")]);
    await apply(s, args);
    await s.clearSession();
    await apply(s, args);
    expect(await s.getItems()).toEqual([user("committed")]);
  });

  it("rejects invalid transaction input before any change, with a coded error, and the id stays free", async () => {
    const s = await session([user("start")]);
    const bad: [unknown, RegExp][] = [
      [
        { operationId: "   ", transaction: { type: "append_items", items: [] } },
        /operationId must be a non-empty string/,
      ],
      [{ operationId: "", transaction: { type: "append_items", items: [] } }, /operationId must be a non-empty string/],
      [{ operationId: 42, transaction: { type: "append_items", items: [] } }, /operationId must be a non-empty string/],
      [{ operationId: "op-bad", transaction: { type: "unknown" } }, /unsupported session history transaction type/i],
      [{ operationId: "op-bad", transaction: null }, /transaction must be an object/],
      [{ operationId: "op-bad", transaction: { type: "append_items", items: [42] } }, /invalid or unsupported data/],
      [
        { operationId: "op-bad", transaction: { type: "append_items", items: "nope" } },
        /append transaction fields are invalid/,
      ],
      [
        { operationId: "op-bad", transaction: { type: "append_items", items: [user("x")], metadata: { attempt: 1 } } },
        /append transaction fields are invalid/,
      ],
      [
        {
          operationId: "op-bad",
          transaction: { type: "replace_suffix", expectedSuffix: [user("start")], replacement: [], extra: 1 },
        },
        /suffix transaction fields are invalid/,
      ],
      [
        { operationId: "op-bad", transaction: { type: "replace_suffix", expectedSuffix: [user("start")] } },
        /suffix transaction fields are invalid/,
      ],
      [null, /arguments are invalid/],
    ];
    for (const [args, message] of bad) {
      const error = await apply(s, args as SessionHistoryTransactionArgs).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error, JSON.stringify(args)).toMatchObject({
        code: "invalid_request",
        message: expect.stringMatching(message),
      });
    }
    expect(await s.getItems()).toEqual([user("start")]);
    await apply(s, append("op-bad", [user("retry")]));
    expect(await s.getItems()).toEqual([user("start"), user("retry")]);
  });

  it("rejects data that cannot be stored and compared exactly before any change, without leaking it", async () => {
    const s = await session([user("start")]);
    const withProvider = (providerData: unknown) => ({ ...user("unsupported"), providerData }) as AgentInputItem;
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    const hidden = user("hidden");
    Object.defineProperty(hidden, "providerData", { enumerable: false, value: { hidden: true } });
    const cases: AgentInputItem[][] = [
      [withProvider({ timestamp: new Date(0) })],
      [withProvider(cycle)],
      [withProvider({ value: 42n })],
      [withProvider({ secret: Symbol("api-key-secret") })],
      [withProvider({ values: new Uint16Array([300]) })],
      [withProvider({ values: new Array(1) })],
      new Array<AgentInputItem>(1),
      [hidden],
    ];
    for (const items of cases) {
      const error = await apply(s, append("operation-unsupported", items)).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toMatchObject({
        code: "invalid_request",
        message: expect.stringMatching(/invalid or unsupported data/),
      });
      expect(String((error as Error).message)).not.toContain("api-key-secret");
    }
    expect(await s.getItems()).toEqual([user("start")]);
    await apply(s, append("operation-unsupported", [user("accepted")]));
    expect(await s.getItems()).toEqual([user("start"), user("accepted")]);
  });

  it("treats data that only differs in key order or prototype as the same transaction", async () => {
    const s = await session();
    const item = user("canonical");
    item.providerData = Object.assign(Object.create(null), { b: 2, a: 1 });
    await apply(s, append("operation-canonical", [item]));
    const [read] = await s.getItems();
    await apply(s, append("operation-canonical", [{ ...read, providerData: { a: 1, b: 2 } } as AgentInputItem]));
    await apply(s, {
      operationId: "operation-canonical-replace",
      transaction: { type: "replace_suffix", expectedSuffix: [item], replacement: [user("replaced")] },
    });
    expect(await s.getItems()).toEqual([user("replaced")]);
  });

  it("refuses an item the SDK never produces with a coded error naming it, storing nothing", async () => {
    const s = await session([user("start")]);
    const never: unknown[] = [
      42,
      null,
      "text",
      { type: "function_call" },
      { role: "user", content: 42 },
      { type: "no_such_item", foo: 1 },
      { role: "robot", content: "x" },
    ];
    for (const item of never) {
      const error = await s.addItems([user("ok"), item as AgentInputItem]).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error, JSON.stringify(item)).toMatchObject({
        code: "invalid_message",
        message: expect.stringMatching(/item 1\b/),
      });
    }
    expect(await s.getItems()).toEqual([user("start")]);
  });
}
