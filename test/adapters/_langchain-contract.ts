/**
 * LangChain's chat message history contract, held against `ThreadkeepChatMessageHistory` on one store.
 * Modelled on `BaseListChatMessageHistory` and its reference `InMemoryChatMessageHistory` in
 * `@langchain/core/chat_history` (1.x), and on LangChain's own tests of its persistent histories (a
 * new session reads `[]`; `addUserMessage` / `addAIMessage` read back as `HumanMessage` / `AIMessage`;
 * `clear` empties it; histories of two session ids are apart): every message type with its
 * `additional_kwargs`, `response_metadata`, ids, names, tool calls and content blocks comes back as
 * LangChain's own serialisation (`mapChatMessagesToStoredMessages`) gives it; what `RunnableWithMessageHistory`
 * hands over after streaming (an `AIMessageChunk`) is kept as the answer it is.
 */
import { randomUUID } from "node:crypto";
import { InMemoryChatMessageHistory } from "@langchain/core/chat_history";
import {
  AIMessage,
  AIMessageChunk,
  type BaseMessage,
  ChatMessage,
  FunctionMessage,
  HumanMessage,
  mapChatMessagesToStoredMessages,
  SystemMessage,
  ToolMessage,
} from "@langchain/core/messages";
import { ChatPromptTemplate, MessagesPlaceholder } from "@langchain/core/prompts";
import { RunnableWithMessageHistory } from "@langchain/core/runnables";
import { ChatOpenAI } from "@langchain/openai";
import { expect, it } from "vitest";
import { ThreadkeepChatMessageHistory } from "../../src/adapters/langchain.js";
import type { Memory } from "../../src/core/memory/memory.js";
import type { FakeUpstream } from "../_fake-upstream.js";

/** Every message type LangChain stores in a history, with the fields each carries. */
export function langchainMessages(): BaseMessage[] {
  return [
    new SystemMessage({ content: "Be brief.", id: "sys-1", additional_kwargs: { cache: true } }),
    new HumanMessage("plain text"),
    new HumanMessage({
      content: [
        { type: "text", text: "Look at this, Ünïcödé ✓ 😀" },
        { type: "image_url", image_url: { url: "data:image/png;base64,AAAA", detail: "low" } },
      ],
      name: "ada",
      id: "h-1",
      additional_kwargs: { client: { trace: [1, 2, 3] } },
      response_metadata: { source: "form" },
    }),
    new HumanMessage({
      content: [
        { type: "text", text: "standard blocks" },
        { type: "image", url: "https://example.invalid/a.png", mimeType: "image/png" },
      ],
    }),
    new AIMessage({
      content: "",
      id: "ai-1",
      tool_calls: [
        { id: "call_1", name: "list_tasks", args: { all: true, filter: { tags: ["a", "b"] } }, type: "tool_call" },
        { id: "call_2", name: "get_weather", args: { city: "Utrecht" }, type: "tool_call" },
      ],
      invalid_tool_calls: [
        { id: "call_3", name: "broken", args: "{not json", error: "bad JSON", type: "invalid_tool_call" },
      ],
      response_metadata: { model_name: "m1", finish_reason: "tool_calls", system_fingerprint: null },
      additional_kwargs: { custom: 1, refusal: null },
      usage_metadata: { input_tokens: 3, output_tokens: 2, total_tokens: 5, input_token_details: { cache_read: 1 } },
    }),
    new ToolMessage({ content: '[{"id":42}]', tool_call_id: "call_1", name: "list_tasks", artifact: { rows: 1 } }),
    new ToolMessage({ content: "Utrecht is down", tool_call_id: "call_2", status: "error" }),
    new AIMessage({
      content: [
        { type: "text", text: "Task 42." },
        { type: "reasoning", reasoning: "it is the only one" },
      ],
      name: "planner",
    }),
    new ChatMessage({ content: "a note", role: "critic" }),
    new FunctionMessage({ content: "legacy result", name: "old_function" }),
  ];
}

/** What LangChain's own serialisation makes of messages: what a history must give back. */
const serialised = (messages: BaseMessage[]) => mapChatMessagesToStoredMessages(messages);

type Holder = { readonly memory: Memory };

/** LangChain's chat message history contract on the memory `stack` holds; `upstream` is the fake model ChatOpenAI talks to. */
export function langchainHistoryContract(stack: Holder, upstream: { readonly fake: FakeUpstream }): void {
  const history = (sessionId: string = `lc-${randomUUID()}`, userId = "contract") =>
    new ThreadkeepChatMessageHistory({ memory: stack.memory, sessionId, userId });

  it("reads a new session as empty, and addUserMessage / addAIMessage back as Human and AI messages", async () => {
    const h = history();
    expect(await h.getMessages()).toStrictEqual([]);
    await h.addUserMessage("Who is the best vocalist?");
    await h.addAIMessage("Ozzy Osbourne");
    const read = await h.getMessages();
    expect(read).toEqual([new HumanMessage("Who is the best vocalist?"), new AIMessage("Ozzy Osbourne")]);
    expect(read[0]).toBeInstanceOf(HumanMessage);
    expect(read[1]).toBeInstanceOf(AIMessage);
  });

  it("keeps a RunnableWithMessageHistory conversation, invoked and streamed, as LangChain's reference history does", async () => {
    const fake = upstream.fake;
    fake.setReply((body) => ({ content: `echo: ${body.messages.at(-1).content}` }));
    const prompt = ChatPromptTemplate.fromMessages([
      ["system", "You are terse."],
      new MessagesPlaceholder("history"),
      ["human", "{input}"],
    ]);
    const model = new ChatOpenAI({
      model: "fake-model",
      apiKey: "sk-test",
      configuration: { baseURL: fake.url },
      maxRetries: 0,
    });
    const run = async (getMessageHistory: () => InMemoryChatMessageHistory | ThreadkeepChatMessageHistory) => {
      const chain = new RunnableWithMessageHistory({
        runnable: prompt.pipe(model),
        getMessageHistory,
        inputMessagesKey: "input",
        historyMessagesKey: "history",
      });
      const config = { configurable: { sessionId: "ignored" } };
      await chain.invoke({ input: "My name is Ada." }, config);
      for await (const _chunk of await chain.stream({ input: "What is my name?" }, config)) void _chunk;
      return (fake.chatRequests().at(-1)!.body.messages as { role: string; content: string }[]).map(
        (m) => `${m.role}: ${m.content}`,
      );
    };
    const reference = new InMemoryChatMessageHistory();
    const h = history();
    const sentWithReference = await run(() => reference);
    const sent = await run(() => h);
    expect(sent).toEqual(sentWithReference);
    expect(sent).toEqual([
      "system: You are terse.",
      "user: My name is Ada.",
      "assistant: echo: My name is Ada.",
      "user: What is my name?",
    ]);
    const without = (ms: BaseMessage[]) =>
      serialised(ms).map(({ type, data }) => ({
        type,
        content: data.content,
        tool_calls: (data as { tool_calls?: unknown }).tool_calls,
      }));
    expect(without(await h.getMessages())).toEqual(without(await reference.getMessages()));
    expect((await h.getMessages()).map((m) => m.constructor.name)).toEqual([
      "HumanMessage",
      "AIMessage",
      "HumanMessage",
      "AIMessage",
    ]);
  });

  it("gives back every message type with all its fields, as LangChain's reference history does", async () => {
    const messages = langchainMessages();
    const reference = new InMemoryChatMessageHistory();
    const h = history();
    for (const m of messages.slice(0, 3)) {
      await reference.addMessage(m);
      await h.addMessage(m);
    }
    await reference.addMessages(messages.slice(3));
    await h.addMessages(messages.slice(3));
    const read = await h.getMessages();
    expect(serialised(read)).toEqual(serialised(await reference.getMessages()));
    expect(read.map((m) => m.constructor.name)).toEqual(messages.map((m) => m.constructor.name));
    expect((read[4] as AIMessage).tool_calls).toEqual((messages[4] as AIMessage).tool_calls);
    expect((read[4] as AIMessage).usage_metadata).toEqual((messages[4] as AIMessage).usage_metadata);
    expect(read[5]).toMatchObject({ tool_call_id: "call_1", artifact: { rows: 1 } });
    expect(read[6]).toMatchObject({ status: "error" });
    // A second history object on the same session id reads the same messages.
    expect(serialised(await history(h.sessionId).getMessages())).toEqual(serialised(messages));
  });

  it("stores messages as the chat messages they mean, so the proxy and context assembly read the same thread", async () => {
    const h = history();
    await h.addMessages(langchainMessages().slice(4, 7));
    const context = await stack.memory.buildContext(h.sessionId, { userId: "contract" });
    expect(context.messages.map((m) => m.role)).toEqual(["assistant", "tool", "tool"]);
    expect(
      context.messages[0].tool_calls?.map((c) => [c.id, c.function.name, JSON.parse(c.function.arguments)]),
    ).toEqual([
      ["call_1", "list_tasks", { all: true, filter: { tags: ["a", "b"] } }],
      ["call_2", "get_weather", { city: "Utrecht" }],
    ]);
    expect(context.messages.slice(1).map((m) => m.tool_call_id)).toEqual(["call_1", "call_2"]);
  });

  it("gives content blocks their chat completions form: standard image and file blocks as chat parts, reasoning left out", async () => {
    const h = history();
    await h.addMessages([
      new HumanMessage({
        content: [
          { type: "text", text: "compare" },
          { type: "image", url: "https://example.invalid/a.png" },
          { type: "image", data: "AAAA", mimeType: "image/png" },
          { type: "image_url", image_url: "https://example.invalid/b.png" },
          { type: "file", data: "JVBER", mimeType: "application/pdf", filename: "a.pdf" },
        ],
      }),
      new AIMessage({
        content: [
          { type: "reasoning", reasoning: "hidden" },
          { type: "text", text: "They differ." },
        ],
      }),
    ]);
    const context = await stack.memory.buildContext(h.sessionId, { userId: "contract" });
    expect(context.messages.map((m) => m.content)).toEqual([
      [
        { type: "text", text: "compare" },
        { type: "image_url", image_url: { url: "https://example.invalid/a.png" } },
        { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
        { type: "image_url", image_url: { url: "https://example.invalid/b.png" } },
        { type: "file", file: { file_data: "data:application/pdf;base64,JVBER", filename: "a.pdf" } },
      ],
      "They differ.",
    ]);
    expect(serialised(await h.getMessages())[1].data.content).toEqual([
      { type: "reasoning", reasoning: "hidden" },
      { type: "text", text: "They differ." },
    ]);
  });

  it("keeps a streamed answer (an AIMessageChunk, as RunnableWithMessageHistory hands it over) with its tool calls", async () => {
    const h = history();
    const chunk = new AIMessageChunk({
      content: "Calling.",
      id: "run-1",
      tool_call_chunks: [{ id: "call_9", name: "lookup", args: '{"q":', index: 0, type: "tool_call_chunk" }],
    }).concat(
      new AIMessageChunk({ content: "", tool_call_chunks: [{ args: "1}", index: 0, type: "tool_call_chunk" }] }),
    );
    expect(chunk.tool_calls).toEqual([{ id: "call_9", name: "lookup", args: { q: 1 }, type: "tool_call" }]);
    await h.addMessages([new HumanMessage("look it up"), chunk]);
    const [, answer] = await h.getMessages();
    expect(answer).toBeInstanceOf(AIMessage);
    expect(answer).toMatchObject({
      content: "Calling.",
      id: "run-1",
      tool_calls: [{ id: "call_9", name: "lookup", args: { q: 1 } }],
    });
    const stored = await stack.memory.getMessages(h.sessionId, { userId: "contract" });
    expect(stored[1]).toMatchObject({
      role: "assistant",
      content: "Calling.",
      tool_calls: [{ id: "call_9", function: { name: "lookup", arguments: '{"q":1}' } }],
    });
  });

  it("hands out copies: changing a message given or read changes nothing stored", async () => {
    const h = history();
    const given = new AIMessage({ content: "kept", additional_kwargs: { n: 1 } });
    await h.addMessage(given);
    given.additional_kwargs.n = 2;
    const [read] = await h.getMessages();
    read.additional_kwargs.n = 3;
    (read as { content: unknown }).content = "changed";
    const [again] = await h.getMessages();
    expect(again).toMatchObject({ content: "kept", additional_kwargs: { n: 1 } });
  });

  it("appends addMessages in order, all or nothing", async () => {
    const h = history();
    await h.addMessages([new HumanMessage("1"), new AIMessage("2")]);
    await h.addMessages([]);
    await h.addMessages([new HumanMessage("3"), new AIMessage("4")]);
    expect((await h.getMessages()).map((m) => m.content)).toEqual(["1", "2", "3", "4"]);
    const error = await h
      .addMessages([new HumanMessage("5"), { content: "not a message" } as unknown as BaseMessage])
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(error).toMatchObject({ code: "invalid_message", message: expect.stringMatching(/message 1\b/) });
    expect((await h.getMessages()).map((m) => m.content)).toEqual(["1", "2", "3", "4"]);
  });

  it("refuses what is not a LangChain message with a coded error naming it, storing nothing", async () => {
    const h = history();
    await h.addUserMessage("start");
    for (const bad of [null, "text", 42, { role: "user", content: "an OpenAI message, not a LangChain one" }]) {
      const error = await h.addMessage(bad as unknown as BaseMessage).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error, JSON.stringify(bad)).toMatchObject({
        code: "invalid_message",
        message: expect.stringMatching(/message 0\b/),
      });
    }
    await expect(h.addMessages("nope" as unknown as BaseMessage[])).rejects.toMatchObject({ code: "invalid_message" });
    expect((await h.getMessages()).map((m) => m.content)).toEqual(["start"]);
    expect(() => history("")).toThrow(expect.objectContaining({ code: "invalid_session_id" }));
  });

  it("clears a session (a new or cleared one clears again), and it takes messages after", async () => {
    const h = history();
    await h.clear();
    await h.addMessages(langchainMessages());
    await h.clear();
    expect(await h.getMessages()).toStrictEqual([]);
    await h.clear();
    await h.addUserMessage("after");
    expect(await h.getMessages()).toEqual([new HumanMessage("after")]);
  });

  it("keeps session ids and users apart", async () => {
    const id = `lc-${randomUUID()}`;
    const a = history(id);
    const b = history(`${id}-other`);
    const otherUser = history(id, `other-${randomUUID()}`);
    await a.addUserMessage("a");
    await b.addUserMessage("b");
    expect((await a.getMessages()).map((m) => m.content)).toEqual(["a"]);
    expect(await otherUser.getMessages()).toStrictEqual([]);
    await otherUser.clear();
    expect((await a.getMessages()).map((m) => m.content)).toEqual(["a"]);
  });
}
