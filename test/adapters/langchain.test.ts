/**
 * `threadkeep/langchain` with the real LangChain: RunnableWithMessageHistory over ChatOpenAI pointed at
 * the fake upstream, so the test sees the history that reaches the model; message types round-trip.
 */
import {
  AIMessage,
  ChatMessage,
  HumanMessage,
  mapChatMessagesToStoredMessages,
  SystemMessage,
  ToolMessage,
} from "@langchain/core/messages";
import { ChatPromptTemplate, MessagesPlaceholder } from "@langchain/core/prompts";
import { RunnableWithMessageHistory } from "@langchain/core/runnables";
import { ChatOpenAI } from "@langchain/openai";
import { describe, expect, it } from "vitest";
import { ThreadkeepChatMessageHistory } from "../../src/adapters/langchain.js";
import { useFakeAndMemory } from "./_setup.js";

const stack = useFakeAndMemory();

const history = (sessionId: string, userId = "alice") =>
  new ThreadkeepChatMessageHistory({ memory: stack.memory, sessionId, userId });

describe("ThreadkeepChatMessageHistory", () => {
  it("keeps a RunnableWithMessageHistory conversation over two turns", async () => {
    const model = new ChatOpenAI({
      model: "fake-model",
      apiKey: "sk-test",
      configuration: { baseURL: stack.fake.url },
      maxRetries: 0,
    });
    const prompt = ChatPromptTemplate.fromMessages([
      ["system", "You are terse."],
      new MessagesPlaceholder("history"),
      ["human", "{input}"],
    ]);
    const chain = new RunnableWithMessageHistory({
      runnable: prompt.pipe(model),
      getMessageHistory: (sessionId: string) => history(sessionId),
      inputMessagesKey: "input",
      historyMessagesKey: "history",
    });
    const config = { configurable: { sessionId: "langchain-chat-1" } };
    const first = await chain.invoke({ input: "My name is Ada." }, config);
    expect(first.content).toBe("echo: My name is Ada.");
    const second = await chain.invoke({ input: "What is my name?" }, config);
    expect(second.content).toBe("echo: What is my name?");

    const sent = stack.fake.chatRequests().at(-1)!.body.messages;
    expect(sent.map((m: { role: string; content: string }) => [m.role, m.content])).toEqual([
      ["system", "You are terse."],
      ["user", "My name is Ada."],
      ["assistant", "echo: My name is Ada."],
      ["user", "What is my name?"],
    ]);
    // Stored as plain chat messages too, so the proxy, the CLI and context assembly read the same thread.
    const stored = await stack.memory.getMessages(history("langchain-chat-1").sessionId, { userId: "alice" });
    expect(stored.map((m) => [m.seq, m.role, m.content])).toEqual([
      [1, "user", "My name is Ada."],
      [2, "assistant", "echo: My name is Ada."],
      [3, "user", "What is my name?"],
      [4, "assistant", "echo: What is my name?"],
    ]);
  });

  it("round-trips every LangChain message type exactly", async () => {
    const messages = [
      new SystemMessage({ content: "Be brief.", id: "sys-1" }),
      new HumanMessage({
        content: [
          { type: "text", text: "Look:" },
          { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
        ],
        name: "ada",
        id: "h-1",
      }),
      new AIMessage({
        content: "",
        id: "ai-1",
        tool_calls: [{ id: "call_1", name: "list_tasks", args: { all: true }, type: "tool_call" }],
        response_metadata: { model_name: "m1" },
        additional_kwargs: { custom: 1 },
      }),
      new ToolMessage({ content: '[{"id":42}]', tool_call_id: "call_1", name: "list_tasks" }),
      new AIMessage({ content: "Task 42.", usage_metadata: { input_tokens: 3, output_tokens: 2, total_tokens: 5 } }),
      new ChatMessage({ content: "a note", role: "critic" }),
    ];
    const h = history("roundtrip");
    await h.addMessages(messages);
    const read = await h.getMessages();
    expect(mapChatMessagesToStoredMessages(read)).toEqual(mapChatMessagesToStoredMessages(messages));
    expect(read.map((m) => m.constructor.name)).toEqual(messages.map((m) => m.constructor.name));

    const stored = await stack.memory.getMessages(h.sessionId, { userId: "alice" });
    expect(stored[2]).toMatchObject({
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "list_tasks", arguments: '{"all":true}' } }],
    });
    expect(stored[3]).toMatchObject({ role: "tool", tool_call_id: "call_1", content: '[{"id":42}]' });
    expect(stored[5]).toMatchObject({ role: "user", content: "a note" });
  });

  it("reads messages other clients stored as LangChain messages", async () => {
    const h = history("from-the-proxy");
    await stack.memory.addMessages(
      h.sessionId,
      [
        { role: "user", content: "list my tasks" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c9", type: "function", function: { name: "list", arguments: '{"x":1}' } }],
        },
        { role: "tool", tool_call_id: "c9", content: "[]" },
        { role: "assistant", content: "None." },
      ],
      { userId: "alice" },
    );
    const [human, call, result, answer] = await h.getMessages();
    expect(human).toBeInstanceOf(HumanMessage);
    expect(call).toBeInstanceOf(AIMessage);
    expect((call as AIMessage).tool_calls).toEqual([{ id: "c9", name: "list", args: { x: 1 }, type: "tool_call" }]);
    expect(result).toBeInstanceOf(ToolMessage);
    expect((result as ToolMessage).tool_call_id).toBe("c9");
    expect(answer.content).toBe("None.");
  });

  it("keeps users apart, reads a new session as empty and clears", async () => {
    const mine = history("shared-name");
    await mine.addUserMessage("mine");
    const theirs = history("shared-name", "bob");
    expect(theirs.sessionId).not.toBe(mine.sessionId);
    expect(await theirs.getMessages()).toEqual([]);
    await theirs.clear();
    expect((await mine.getMessages()).map((m) => m.content)).toEqual(["mine"]);
    await mine.clear();
    expect(await mine.getMessages()).toEqual([]);
    // A threadkeep session id is used as it is, so the proxy and LangChain can share a thread.
    const id = crypto.randomUUID();
    expect(history(id).sessionId).toBe(id);
  });
});
