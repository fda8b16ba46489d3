/**
 * `threadkeep/ai-sdk` with the real AI SDK: streamText over @ai-sdk/openai's chat model pointed at the
 * fake upstream, its UI message stream saved by createChatStore and loaded again for the next turn, as
 * a route handler behind useChat does: three turns, a regenerate, an edit, and a tool turn.
 */
import { createOpenAI } from "@ai-sdk/openai";
import { convertToModelMessages, stepCountIs, streamText, tool, type UIMessage } from "ai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createChatStore } from "../../src/adapters/ai-sdk.js";
import { lastSentTexts, useFakeAndMemory } from "./_setup.js";

const stack = useFakeAndMemory();

const tools = {
  get_weather: tool({
    description: "The weather in a city",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }: { city: string }) => ({ city, forecast: "sunny" }),
  }),
};

let ids = 0;
const user = (text: string): UIMessage => ({ id: `u${++ids}`, role: "user", parts: [{ type: "text", text }] });

/** One request of a useChat route: stream the answer to `messages` and save the chat when it ends. */
async function respond(
  chats: ReturnType<typeof createChatStore>,
  chatId: string,
  messages: UIMessage[],
): Promise<UIMessage[]> {
  const provider = createOpenAI({ baseURL: stack.fake.url, apiKey: "sk-test" });
  const result = streamText({
    model: provider.chat("fake-model"),
    system: "Be terse.",
    messages: await convertToModelMessages(messages),
    tools,
    stopWhen: stepCountIs(3),
  });
  let saved!: Promise<void>;
  const stream = result.toUIMessageStream({
    originalMessages: messages,
    generateMessageId: () => `a${++ids}`,
    onFinish: ({ messages: all }) => {
      saved = chats.saveChat({ chatId, messages: all });
    },
  });
  for await (const _chunk of stream) void _chunk;
  await saved;
  return chats.loadChat(chatId);
}

const sentTexts = () => lastSentTexts(stack.fake);

describe("createChatStore with AI SDK streamText", () => {
  it("saves and loads three turns, a regenerate kept as a branch", async () => {
    const chats = createChatStore({ memory: stack.memory, userId: "alice" });
    const chatId = "Xq3k9LmN0pQrStUv"; // an AI SDK generateId() style id
    stack.fake.setReply((body) => ({ content: `echo: ${body.messages.at(-1).content}` }));

    let chat = await respond(chats, chatId, [...(await chats.loadChat(chatId)), user("My name is Ada.")]);
    expect(chat.map((m) => m.role)).toEqual(["user", "assistant"]);
    chat = await respond(chats, chatId, [...(await chats.loadChat(chatId)), user("What is my name?")]);
    expect(sentTexts()).toEqual([
      "system: Be terse.",
      "user: My name is Ada.",
      "assistant: echo: My name is Ada.",
      "user: What is my name?",
    ]);
    const answer = chat.at(-1)!;

    // Regenerate: useChat sends the chat without its last answer; the new answer replaces it.
    stack.fake.setReply(() => ({ content: "You are Ada." }));
    chat = await respond(chats, chatId, chat.slice(0, -1));
    expect(chat).toHaveLength(4);
    expect(chat.at(-1)!.id).not.toBe(answer.id);
    expect(chat.at(-1)!.parts.filter((p) => p.type === "text")).toEqual([
      expect.objectContaining({ type: "text", text: "You are Ada." }),
    ]);
    expect(await chats.loadChat(chatId)).toEqual(chat);

    const sessionId = (await chats.listChats()).find((c) => c.id === chatId)!.sessionId;
    const [branch] = await stack.memory.listBranches(sessionId, { userId: "alice" });
    expect(branch).toMatchObject({ reason: "regenerate", atSeq: 3 });
    expect(branch.messages.map((m) => m.content)).toEqual(["echo: What is my name?"]);
    const stored = await stack.memory.getMessages(sessionId, { userId: "alice" });
    expect(stored.map((m) => `${m.role}: ${m.content}`)).toEqual([
      "user: My name is Ada.",
      "assistant: echo: My name is Ada.",
      "user: What is my name?",
      "assistant: You are Ada.",
    ]);
  });

  it("stores only what changed, and an edit supersedes the tail as a branch", async () => {
    const chats = createChatStore({ memory: stack.memory, userId: "alice" });
    stack.fake.setReply((body) => ({ content: `echo: ${body.messages.at(-1).content}` }));
    const chat = await respond(chats, "edit-chat", [user("Buy milk")]);
    const sessionId = (await chats.listChats()).find((c) => c.id === "edit-chat")!.sessionId;
    const before = await stack.memory.getMessages(sessionId, { userId: "alice" });
    await chats.saveChat({ chatId: "edit-chat", messages: chat });
    expect(await stack.memory.getMessages(sessionId, { userId: "alice" })).toEqual(before);

    const edited: UIMessage = { ...chat[0], parts: [{ type: "text", text: "Buy oat milk" }] };
    const after = await respond(chats, "edit-chat", [edited]);
    expect(after.map((m) => m.parts.find((p) => p.type === "text"))).toEqual([
      { type: "text", text: "Buy oat milk" },
      expect.objectContaining({ text: "echo: Buy oat milk" }),
    ]);
    const [branch] = await stack.memory.listBranches(sessionId, { userId: "alice" });
    expect(branch).toMatchObject({ reason: "edit", atSeq: 0 });
    expect(branch.messages.map((m) => m.content)).toEqual(["Buy milk", "echo: Buy milk"]);
  });

  it("round-trips tool parts and UI message ids, and the model gets a chat tool exchange", async () => {
    const chats = createChatStore({ memory: stack.memory, userId: "alice" });
    stack.fake.setReply((body) =>
      body.messages.at(-1).role === "tool"
        ? { content: "Sunny in Utrecht." }
        : {
            tool_calls: [
              { id: "call_w1", type: "function", function: { name: "get_weather", arguments: '{"city":"Utrecht"}' } },
            ],
          },
    );
    const first = user("Weather in Utrecht?");
    const chat = await respond(chats, "tool-chat", [first]);
    const answer = chat[1];
    const toolPart = answer.parts.find((p) => p.type === "tool-get_weather");
    expect(toolPart).toMatchObject({
      toolCallId: "call_w1",
      state: "output-available",
      input: { city: "Utrecht" },
      output: { city: "Utrecht", forecast: "sunny" },
    });
    expect(chat[0]).toEqual(first);

    stack.fake.setReply(() => ({ content: "You're welcome." }));
    await respond(chats, "tool-chat", [...chat, user("Thanks")]);
    const sent = stack.fake.chatRequests().at(-1)!.body.messages;
    expect(sent.map((m: { role: string }) => m.role)).toEqual([
      "system",
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
    ]);
    expect(sent[2].tool_calls[0]).toMatchObject({ id: "call_w1", function: { name: "get_weather" } });
    const loaded = await chats.loadChat("tool-chat");
    expect(loaded.slice(0, 2)).toEqual(chat);
    const sessionId = (await chats.listChats()).find((c) => c.id === "tool-chat")!.sessionId;
    const stored = await stack.memory.getMessages(sessionId, { userId: "alice" });
    expect(stored.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant", "user", "assistant"]);
  });

  it("lists, keeps users apart and deletes", async () => {
    const alice = createChatStore({ memory: stack.memory, userId: "alice" });
    const bob = createChatStore({ memory: stack.memory, userId: "bob" });
    await alice.saveChat({ chatId: "shared-id", messages: [user("alice's")] });
    expect(await bob.loadChat("shared-id")).toEqual([]);
    await bob.saveChat({ chatId: "shared-id", messages: [user("bob's")] });
    expect((await alice.loadChat("shared-id"))[0].parts).toEqual([{ type: "text", text: "alice's" }]);
    expect((await bob.listChats()).map((c) => c.id)).toEqual(["shared-id"]);
    expect(await bob.deleteChat("shared-id")).toBe(true);
    expect(await bob.deleteChat("shared-id")).toBe(false);
    expect(await alice.loadChat("shared-id")).toHaveLength(1);
    expect((await alice.listChats()).map((c) => c.id)).toContain("shared-id");
  });
});
