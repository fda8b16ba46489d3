/**
 * Real frameworks on their default Responses paths, pointed at threadkeep: the OpenAI Agents SDK
 * (default Responses model, OpenAIConversationsSession) and the AI SDK's `@ai-sdk/openai` provider.
 */
import { createOpenAI } from "@ai-sdk/openai";
import {
  Agent,
  OpenAIConversationsSession,
  run,
  setDefaultOpenAIClient,
  setTracingDisabled,
  tool,
} from "@openai/agents";
import { streamText } from "ai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { type Stack, startStack, transcript } from "./_stack.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ model: "fake-model" });
  // Traces would go to OpenAI's servers; tests reach 127.0.0.1 only.
  setTracingDisabled(true);
});
afterAll(() => stack.close());

const text = (m: any) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? ""));

describe("OpenAI Agents SDK", () => {
  it("runs an agent with a tool over two runs sharing an OpenAIConversationsSession; the second knows the first", async () => {
    const client = stack.client();
    setDefaultOpenAIClient(client as never);
    stack.fake.setReply((body) => {
      const last = body.messages.at(-1);
      if (last.role === "tool") return { content: `It is ${last.content}.` };
      if (text(last).includes("Weather in Paris")) {
        return {
          tool_calls: [
            { id: "call_paris", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
          ],
        };
      }
      const remembered = body.messages.some((m: any) => m.role === "user" && text(m).includes("Paris"));
      return { content: remembered ? "You asked about Paris." : "I do not know." };
    });
    const getWeather = tool({
      name: "get_weather",
      description: "The weather in a city",
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => `sunny in ${city}`,
    });
    const agent = new Agent({ name: "Assistant", instructions: "Be brief.", model: "fake-model", tools: [getWeather] });
    const session = new OpenAIConversationsSession({ client: client as never });

    const first = await run(agent, "Weather in Paris?", { session });
    expect(first.finalOutput).toBe("It is sunny in Paris.");
    const second = await run(agent, "Which city did I ask about?", { session });
    expect(second.finalOutput).toBe("You asked about Paris.");

    const sent = stack.fake.chatRequests().at(-1)!.body;
    expect(sent.tools).toEqual([
      expect.objectContaining({ type: "function", function: expect.objectContaining({ name: "get_weather" }) }),
    ]);
    expect(transcript(sent)).toEqual([
      "system: Be brief.",
      "user: Weather in Paris?",
      "assistant: null",
      "tool: sunny in Paris",
      "assistant: It is sunny in Paris.",
      "user: Which city did I ask about?",
    ]);
    // The session's conversation holds both runs, as items threadkeep stored.
    const conversationId = await session.getSessionId();
    const items = await client.conversations.items.list(conversationId, { order: "asc" });
    expect(items.data.map((i) => i.type)).toEqual([
      "message",
      "function_call",
      "function_call_output",
      "message",
      "message",
      "message",
    ]);
  });
});

describe("AI SDK (@ai-sdk/openai, Responses by default)", () => {
  it("streams a two-turn chat; the second turn continues the first on the server", async () => {
    stack.fake.setReply((body) => {
      const said = body.messages.some((m: any) => m.role === "user" && text(m).includes("My name is Ada"));
      return { content: body.messages.length > 1 && said ? "Your name is Ada." : "Nice to meet you." };
    });
    const openai = createOpenAI({ baseURL: `${stack.url}/v1`, apiKey: "sk-unused" });
    const first = streamText({ model: openai("fake-model"), messages: [{ role: "user", content: "My name is Ada." }] });
    let firstText = "";
    for await (const delta of first.textStream) firstText += delta;
    expect(firstText).toBe("Nice to meet you.");
    const responseId = (await first.providerMetadata)?.openai?.responseId as string;
    expect(responseId).toMatch(/^resp_/);

    const second = streamText({
      model: openai("fake-model"),
      messages: [{ role: "user", content: "What is my name?" }],
      providerOptions: { openai: { previousResponseId: responseId } },
    });
    let secondText = "";
    for await (const delta of second.textStream) secondText += delta;
    expect(secondText).toBe("Your name is Ada.");
    expect(transcript(stack.fake.chatRequests().at(-1)!.body)).toEqual([
      "user: My name is Ada.",
      "assistant: Nice to meet you.",
      "user: What is my name?",
    ]);
  });
});
