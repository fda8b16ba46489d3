/**
 * The AI SDK's chat persistence pattern, held against `createChatStore` on one store. Modelled on the
 * AI SDK's guide "Chatbot Message Persistence" (ai 6.0, `docs/04-ai-sdk-ui/03-chatbot-message-persistence.mdx`:
 * `loadChat(id)` gives back the `UIMessage[]` that `saveChat({ chatId, messages })` was last handed,
 * as a JSON file would, ids, parts and metadata included) and on what `useChat` sends: a new turn, a
 * continued answer (tool approval, a client-side tool result), `regenerate()` of the last or an older
 * answer, and an edited message (`sendMessage({ messageId })`). Every fixture passes the SDK's own
 * `validateUIMessages`, so it is a message the SDK produces.
 */
import { randomUUID } from "node:crypto";
import { createOpenAI } from "@ai-sdk/openai";
import { convertToModelMessages, stepCountIs, streamText, tool, type UIMessage, validateUIMessages } from "ai";
import { expect, it } from "vitest";
import { z } from "zod";
import { createChatStore } from "../../src/adapters/ai-sdk.js";
import type { Memory } from "../../src/core/memory/memory.js";
import type { FakeUpstream } from "../_fake-upstream.js";

const text = (t: string) => ({ type: "text" as const, text: t });
const userMsg = (id: string, t: string): UIMessage => ({ id, role: "user", parts: [text(t)] });
const answer = (id: string, t: string): UIMessage => ({
  id,
  role: "assistant",
  parts: [{ type: "step-start" }, { ...text(t), state: "done" }],
});

/** A chat with every kind of part the AI SDK puts in a UIMessage, in the states a saved chat holds them. */
export const RICH_CHAT: UIMessage[] = [
  { id: "sys-1", role: "system", parts: [text("Be terse.")] },
  {
    id: "u-1",
    role: "user",
    metadata: { createdAt: 1764300000000, author: { name: "Ada" } },
    parts: [
      text("What is in these? Ünïcödé ✓ 😀"),
      { type: "file", mediaType: "image/png", filename: "a.png", url: "data:image/png;base64,iVBORw0KGgo=" },
      { type: "file", mediaType: "application/pdf", filename: "spec.pdf", url: "https://example.invalid/spec.pdf" },
    ],
  },
  {
    id: "a-1",
    role: "assistant",
    metadata: { model: "fake-model", usage: { inputTokens: 12, outputTokens: 30 }, finishReason: "tool-calls" },
    parts: [
      { type: "step-start" },
      {
        type: "reasoning",
        text: "The user wants a description.",
        state: "done",
        providerMetadata: { openai: { itemId: "rs_1", reasoningEncryptedContent: null } },
      },
      { type: "text", text: "Let me look.", state: "done", providerMetadata: { openai: { itemId: "msg_1" } } },
      {
        type: "tool-get_weather",
        toolCallId: "call_w1",
        state: "output-available",
        input: { city: "Utrecht" },
        output: { city: "Utrecht", forecast: "sunny", temperatures: [12.5, -3, 0] },
        callProviderMetadata: { openai: { itemId: "fc_1" } },
      },
      {
        type: "tool-search",
        toolCallId: "call_s1",
        state: "output-error",
        input: undefined,
        rawInput: '{"q": x',
        errorText: "invalid JSON",
      },
      {
        type: "tool-lookup",
        toolCallId: "call_l1",
        state: "output-available",
        input: {},
        output: "plain text result",
        preliminary: false,
        providerExecuted: true,
      },
      {
        type: "dynamic-tool",
        toolName: "mcp_fetch",
        toolCallId: "call_d1",
        state: "output-available",
        input: { url: "https://example.invalid" },
        output: { status: 200 },
      },
      {
        type: "dynamic-tool",
        toolName: "mcp_fail",
        toolCallId: "call_d2",
        state: "output-error",
        input: undefined,
        errorText: "bad input",
      },
      { type: "step-start" },
      {
        type: "source-url",
        sourceId: "src-1",
        url: "https://example.invalid/page",
        title: "A page",
        providerMetadata: { openai: { rank: 1 } },
      },
      { type: "source-document", sourceId: "src-2", mediaType: "application/pdf", title: "Spec", filename: "spec.pdf" },
      { type: "file", mediaType: "image/png", url: "data:image/png;base64,AAAA" },
      {
        type: "data-weather",
        id: "w-1",
        data: { city: "Utrecht", status: "done", nested: { list: [1, "two", null, true] } },
      },
      { type: "data-notice", data: "transient-looking but persisted" },
      { type: "text", text: "It is sunny; the PDF is a spec.", state: "done" },
    ],
  },
  {
    id: "a-2",
    role: "assistant",
    parts: [
      { type: "step-start" },
      {
        type: "tool-book",
        toolCallId: "call_b1",
        state: "input-streaming",
        input: { city: "Ut" },
        rawInput: '{"city":"Ut',
      },
      { type: "tool-book", toolCallId: "call_b2", state: "input-available", input: { city: "Utrecht" } },
      {
        type: "tool-pay",
        toolCallId: "call_p1",
        state: "approval-requested",
        input: { amount: 5 },
        approval: { id: "ap-1" },
      },
      {
        type: "tool-pay",
        toolCallId: "call_p2",
        state: "approval-responded",
        input: { amount: 6 },
        approval: { id: "ap-2", approved: true, reason: "ok" },
      },
      {
        type: "tool-pay",
        toolCallId: "call_p3",
        state: "output-denied",
        input: { amount: 7 },
        approval: { id: "ap-3", approved: false, reason: "too much" },
      },
      { type: "text", text: "Streaming…", state: "streaming" },
    ],
  },
];

type Holder = { readonly memory: Memory };

/** The AI SDK chat persistence contract on the memory `stack` holds; `upstream` is the fake model streamText talks to. */
export function aiSdkChatStoreContract(stack: Holder, upstream: { readonly fake: FakeUpstream }): void {
  const chats = () => createChatStore({ memory: stack.memory, userId: "contract" });
  /** What the guide's JSON file would give back. */
  const asJson = (messages: UIMessage[]) => JSON.parse(JSON.stringify(messages)) as UIMessage[];
  const sessionOf = async (chatId: string) =>
    (await chats().listChats({ limit: 1000 })).find((c) => c.id === chatId)!.sessionId;
  const stored = async (chatId: string) => stack.memory.getMessages(await sessionOf(chatId), { userId: "contract" });
  const branches = async (chatId: string) => stack.memory.listBranches(await sessionOf(chatId), { userId: "contract" });

  it("uses fixtures the AI SDK's own validateUIMessages accepts", async () => {
    await expect(validateUIMessages({ messages: RICH_CHAT })).resolves.toHaveLength(RICH_CHAT.length);
  });

  it("keeps what the SDK's own stream makes (streamText → toUIMessageStream → onFinish) for the next request", async () => {
    const store = chats();
    const chatId = randomUUID();
    const fake = upstream.fake;
    fake.setReply((body) =>
      body.messages.at(-1).role === "tool"
        ? { content: "Sunny in Utrecht." }
        : {
            tool_calls: [
              { id: "call_w1", type: "function", function: { name: "get_weather", arguments: '{"city":"Utrecht"}' } },
            ],
          },
    );
    const tools = {
      get_weather: tool({
        description: "The weather",
        inputSchema: z.object({ city: z.string() }),
        execute: async ({ city }: { city: string }) => ({ city, forecast: "sunny" }),
      }),
    };
    // One request of a useChat route, as the persistence guide writes it: load, append, stream, save on finish.
    const respond = async (message: UIMessage) => {
      const messages = [...(await store.loadChat(chatId)), message];
      const provider = createOpenAI({ baseURL: fake.url, apiKey: "sk-test" });
      const result = streamText({
        model: provider.chat("fake-model"),
        messages: await convertToModelMessages(messages),
        tools,
        stopWhen: stepCountIs(3),
      });
      let finished!: UIMessage[];
      let saved!: Promise<void>;
      const stream = result.toUIMessageStream({
        originalMessages: messages,
        messageMetadata: ({ part }) => (part.type === "finish" ? { finishReason: part.finishReason } : undefined),
        onFinish: ({ messages: all }) => {
          finished = all;
          saved = store.saveChat({ chatId, messages: all });
        },
      });
      for await (const _chunk of stream) void _chunk;
      await saved;
      return finished;
    };
    const first = await respond(userMsg(`u-${randomUUID()}`, "Weather in Utrecht?"));
    expect(first[1].parts).toContainEqual(
      expect.objectContaining({
        type: "tool-get_weather",
        state: "output-available",
        output: { city: "Utrecht", forecast: "sunny" },
      }),
    );
    expect(first[1].metadata).toEqual({ finishReason: "stop" });
    expect(await store.loadChat(chatId)).toStrictEqual(asJson(first));
    fake.setReply(() => ({ content: "You're welcome." }));
    const second = await respond(userMsg(`u-${randomUUID()}`, "Thanks"));
    expect(await store.loadChat(chatId)).toStrictEqual(asJson(second));
    expect((fake.chatRequests().at(-1)!.body.messages as { role: string }[]).map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
    ]);
  });

  it("gives back exactly what was saved: ids, every kind of part in every state, metadata", async () => {
    const store = chats();
    const chatId = randomUUID();
    expect(await store.loadChat(chatId)).toEqual([]);
    await store.saveChat({ chatId, messages: RICH_CHAT });
    const loaded = await store.loadChat(chatId);
    expect(loaded).toStrictEqual(asJson(RICH_CHAT));
    await expect(validateUIMessages({ messages: loaded })).resolves.toHaveLength(RICH_CHAT.length);
    // Another store object (another request) reads the same chat.
    expect(await chats().loadChat(chatId)).toStrictEqual(asJson(RICH_CHAT));
  });

  it("takes any string as a chat id, and message ids as the SDK makes them", async () => {
    const store = chats();
    for (const chatId of ["Xq3k9LmN0pQrStUv", "chat/with spaces & ü", randomUUID(), `${"x".repeat(300)}`]) {
      const messages = [
        userMsg(`msg-${randomUUID()}`, `hello ${chatId.slice(0, 10)}`),
        answer("msgs_AbCdEfGhIjKlMnOp", "hi"),
      ];
      await store.saveChat({ chatId, messages });
      expect(await store.loadChat(chatId)).toStrictEqual(messages);
    }
  });

  it("appends only what is new when a turn is saved; saving the same chat again writes nothing", async () => {
    const store = chats();
    const chatId = randomUUID();
    const turn1 = [userMsg("u1", "one"), answer("a1", "first")];
    const turn2 = [...turn1, userMsg("u2", "two"), answer("a2", "second")];
    await store.saveChat({ chatId, messages: [turn1[0]] });
    await store.saveChat({ chatId, messages: turn1 });
    const before = await stored(chatId);
    await store.saveChat({ chatId, messages: turn2 });
    const after = await stored(chatId);
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.map((m) => [m.role, m.content])).toEqual([
      ["user", "one"],
      ["assistant", "first"],
      ["user", "two"],
      ["assistant", "second"],
    ]);
    await store.saveChat({ chatId, messages: asJson(turn2) });
    expect(await stored(chatId)).toEqual(after);
    expect(await branches(chatId)).toEqual([]);
    expect(await store.loadChat(chatId)).toStrictEqual(turn2);
  });

  it("updates an answer that goes on (tool approval, a client tool's result, final metadata) without a branch", async () => {
    const store = chats();
    const chatId = randomUUID();
    const question = userMsg("u1", "Pay 5?");
    const asking: UIMessage = {
      id: "a1",
      role: "assistant",
      parts: [
        { type: "step-start" },
        {
          type: "tool-pay",
          toolCallId: "c1",
          state: "approval-requested",
          input: { amount: 5 },
          approval: { id: "ap" },
        },
      ],
    };
    await store.saveChat({ chatId, messages: [question, asking] });
    const approved: UIMessage = {
      ...asking,
      parts: [
        { type: "step-start" },
        {
          type: "tool-pay",
          toolCallId: "c1",
          state: "approval-responded",
          input: { amount: 5 },
          approval: { id: "ap", approved: true },
        },
      ],
    };
    await store.saveChat({ chatId, messages: [question, approved] });
    const done: UIMessage = {
      ...asking,
      metadata: { finishReason: "stop" },
      parts: [
        { type: "step-start" },
        {
          type: "tool-pay",
          toolCallId: "c1",
          state: "output-available",
          input: { amount: 5 },
          output: { paid: true },
          approval: { id: "ap", approved: true },
        },
        { type: "step-start" },
        { type: "text", text: "Paid.", state: "done" },
      ],
    };
    await store.saveChat({ chatId, messages: [question, done] });
    expect(await store.loadChat(chatId)).toStrictEqual([question, done]);
    expect(await branches(chatId)).toEqual([]);
    // The model reads the finished tool exchange.
    expect((await stored(chatId)).map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
  });

  it("regenerates the last answer: the new one replaces it, the old one is kept as a branch", async () => {
    const store = chats();
    const chatId = randomUUID();
    const chat = [userMsg("u1", "one"), answer("a1", "first"), userMsg("u2", "two"), answer("a2", "second")];
    await store.saveChat({ chatId, messages: chat });
    const regenerated = [...chat.slice(0, 3), answer("a2b", "second, again")];
    await store.saveChat({ chatId, messages: regenerated });
    expect(await store.loadChat(chatId)).toStrictEqual(regenerated);
    const [branch] = await branches(chatId);
    expect(branch).toMatchObject({ reason: "regenerate", atSeq: 3 });
    expect(branch.messages.map((m) => m.content)).toEqual(["second"]);
  });

  it("regenerates an older answer (regenerate({ messageId })): everything after it moves to the branch", async () => {
    const store = chats();
    const chatId = randomUUID();
    const chat = [userMsg("u1", "one"), answer("a1", "first"), userMsg("u2", "two"), answer("a2", "second")];
    await store.saveChat({ chatId, messages: chat });
    const regenerated = [chat[0], answer("a1b", "first, again")];
    await store.saveChat({ chatId, messages: regenerated });
    expect(await store.loadChat(chatId)).toStrictEqual(regenerated);
    const [branch] = await branches(chatId);
    expect(branch).toMatchObject({ reason: "regenerate", atSeq: 1 });
    expect(branch.messages.map((m) => m.content)).toEqual(["first", "two", "second"]);
  });

  it("edits a message (sendMessage({ messageId })): same id, new parts, the old tail kept as a branch", async () => {
    const store = chats();
    const chatId = randomUUID();
    const chat = [userMsg("u1", "one"), answer("a1", "first"), userMsg("u2", "two"), answer("a2", "second")];
    await store.saveChat({ chatId, messages: chat });
    const edited = [...chat.slice(0, 2), userMsg("u2", "two, edited"), answer("a3", "edited answer")];
    await store.saveChat({ chatId, messages: edited });
    expect(await store.loadChat(chatId)).toStrictEqual(edited);
    const [branch] = await branches(chatId);
    expect(branch).toMatchObject({ reason: "edit", atSeq: 2 });
    expect(branch.messages.map((m) => m.content)).toEqual(["two", "second"]);
    // Editing the very first message keeps the whole old chat.
    const first = [userMsg("u1", "one, edited"), answer("a4", "new start")];
    await store.saveChat({ chatId, messages: first });
    expect(await store.loadChat(chatId)).toStrictEqual(first);
    expect((await branches(chatId)).map((b) => [b.reason, b.atSeq])).toEqual([
      ["edit", 2],
      ["edit", 0],
    ]);
  });

  it("refuses what the AI SDK never produces with a coded error naming the message, storing nothing", async () => {
    const store = chats();
    const chatId = randomUUID();
    const good = [userMsg("u1", "one"), answer("a1", "first")];
    await store.saveChat({ chatId, messages: good });
    const bad: [unknown, RegExp][] = [
      ["not an array", /messages must be an array/],
      [[...good, { id: "u2", role: "robot", parts: [text("x")] }], /message 2 \("u2"\)/],
      [[...good, { id: "u3", role: "user", parts: [{ type: "nope" }] }], /message 2 \("u3"\)/],
      [[...good, { role: "user", parts: [text("no id")] }], /message 2\b/],
      [[...good, { id: "u4", role: "user" }], /message 2 \("u4"\)/],
      [[...good, null], /message 2\b/],
      [[...good, { id: "u5", role: "user", parts: [{ type: "text" }] }], /message 2 \("u5"\)/],
    ];
    for (const [messages, message] of bad) {
      const error = await store.saveChat({ chatId, messages: messages as UIMessage[] }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error, JSON.stringify(messages)).toMatchObject({
        code: "invalid_message",
        message: expect.stringMatching(message),
      });
    }
    expect(await store.loadChat(chatId)).toStrictEqual(good);
    // A refused first save leaves no chat behind.
    const fresh = `chat-${randomUUID()}`;
    await expect(
      store.saveChat({ chatId: fresh, messages: [{ id: "x", role: "robot", parts: [] } as unknown as UIMessage] }),
    ).rejects.toMatchObject({ code: "invalid_message" });
    expect((await store.listChats({ limit: 1000 })).map((c) => c.id)).not.toContain(fresh);
    await expect(store.saveChat({ chatId: "", messages: good })).rejects.toMatchObject({ code: "invalid_session_id" });
  });

  it("lists the user's chats, keeps users apart, and deletes a chat", async () => {
    const chatId = `chat-${randomUUID()}`;
    const mine = chats();
    const theirs = createChatStore({ memory: stack.memory, userId: `other-${randomUUID()}` });
    await mine.saveChat({ chatId, messages: [userMsg("u1", "mine")] });
    expect(await theirs.loadChat(chatId)).toEqual([]);
    await theirs.saveChat({ chatId, messages: [userMsg("u1", "theirs")] });
    expect(await mine.loadChat(chatId)).toStrictEqual([userMsg("u1", "mine")]);
    expect((await theirs.listChats()).map((c) => c.id)).toEqual([chatId]);
    expect(await theirs.deleteChat(chatId)).toBe(true);
    expect(await theirs.deleteChat(chatId)).toBe(false);
    expect(await theirs.loadChat(chatId)).toEqual([]);
    expect(await mine.loadChat(chatId)).toHaveLength(1);
    // A chat id that is a UUID is that threadkeep session (shared with the proxy): another user's is refused.
    const sessionId = randomUUID();
    await mine.saveChat({ chatId: sessionId, messages: [userMsg("u1", "mine")] });
    expect(await theirs.loadChat(sessionId)).toEqual([]);
    await expect(theirs.saveChat({ chatId: sessionId, messages: [userMsg("u1", "theirs")] })).rejects.toMatchObject({
      code: "session_not_found",
    });
    expect(await theirs.deleteChat(sessionId)).toBe(false);
    expect(await mine.loadChat(sessionId)).toStrictEqual([userMsg("u1", "mine")]);
  });
}
