/**
 * The Responses API, driven by the official `openai` client against threadkeep and a fake chat
 * completions upstream that records what "the model" received.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sessionOfResponse } from "../../src/core/items/index.js";
import { type Stack, startStack, transcript } from "./_stack.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ model: "fake-model" });
});
afterAll(() => stack.close());

const lastChat = () => stack.fake.chatRequests().at(-1)!.body;

describe("POST /v1/responses", () => {
  it("answers a plain request with a response object; instructions go upstream as a system message", async () => {
    const client = stack.client();
    const response = await client.responses.create({
      model: "fake-model",
      input: "hello there",
      instructions: "Be brief.",
    });
    expect(response).toMatchObject({
      object: "response",
      status: "completed",
      model: "fake-model",
      instructions: "Be brief.",
      previous_response_id: null,
      conversation: null,
      store: true,
      metadata: {},
      error: null,
      parallel_tool_calls: true,
      tool_choice: "auto",
      usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15 },
    });
    expect(response.id).toMatch(/^resp_[0-9a-f]+$/);
    expect(response.output).toEqual([
      {
        id: expect.stringMatching(/^msg_/),
        type: "message",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: "echo: hello there", annotations: [] }],
      },
    ]);
    expect(response.output_text).toBe("echo: hello there");
    expect(transcript(lastChat())).toEqual(["system: Be brief.", "user: hello there"]);

    const again = await client.responses.retrieve(response.id);
    expect(again.output).toEqual(response.output);
    expect(again.usage).toEqual(response.usage);
    const inputs = await client.responses.inputItems.list(response.id);
    expect(inputs.data).toEqual([
      {
        id: expect.stringMatching(/^msg_/),
        type: "message",
        role: "user",
        status: "completed",
        content: [{ type: "input_text", text: "hello there" }],
      },
    ]);
  });

  it("translates function tools, tool_choice, sampling, max_output_tokens and text.format", async () => {
    await stack.client().responses.create({
      model: "fake-model",
      input: "json please",
      tools: [
        {
          type: "function",
          name: "lookup",
          description: "Looks up",
          parameters: { type: "object", properties: {} },
          strict: false,
        },
      ],
      tool_choice: { type: "function", name: "lookup" },
      parallel_tool_calls: false,
      temperature: 0.2,
      top_p: 0.9,
      max_output_tokens: 50,
      user: "u-1",
      metadata: { app: "test" },
      text: { format: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true } },
    });
    expect(lastChat()).toMatchObject({
      tools: [
        {
          type: "function",
          function: {
            name: "lookup",
            description: "Looks up",
            parameters: { type: "object", properties: {} },
            strict: false,
          },
        },
      ],
      tool_choice: { type: "function", function: { name: "lookup" } },
      parallel_tool_calls: false,
      temperature: 0.2,
      top_p: 0.9,
      max_tokens: 50,
      user: "u-1",
      response_format: {
        type: "json_schema",
        json_schema: { name: "answer", schema: { type: "object" }, strict: true },
      },
    });
    expect(lastChat().metadata).toBeUndefined();
  });

  it("streams the Responses event sequence converted from chat chunks", async () => {
    const stream = await stack
      .client()
      .responses.create({ model: "fake-model", input: "stream this please", stream: true });
    const events: any[] = [];
    for await (const event of stream) events.push(event);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 4)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    expect(types.slice(-4)).toEqual([
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(types.filter((t) => t === "response.output_text.delta").length).toBeGreaterThan(2);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const deltas = events
      .filter((e) => e.type === "response.output_text.delta")
      .map((e) => e.delta)
      .join("");
    expect(deltas).toBe("echo: stream this please");
    const completed = events.at(-1).response;
    expect(completed.status).toBe("completed");
    expect(completed.output[0].content[0].text).toBe("echo: stream this please");
    expect(completed.usage.total_tokens).toBe(15);
    // What was streamed is what was stored.
    const stored = await stack.client().responses.retrieve(completed.id);
    expect(stored.output).toEqual(completed.output);
  });

  it("keeps the ids of input items: stored with the turn, listed back as sent", async () => {
    const client = stack.client();
    const response = await client.responses.create({
      model: "fake-model",
      input: [
        { type: "message", id: "msg_client_1", role: "user", content: [{ type: "input_text", text: "mine" }] },
      ] as never,
    });
    const inputs = await client.responses.inputItems.list(response.id);
    expect(inputs.data.map((i) => i.id)).toEqual(["msg_client_1"]);
  });

  it("client.responses.stream gives the final response", async () => {
    const runner = stack.client().responses.stream({ model: "fake-model", input: "helper stream" });
    let text = "";
    runner.on("response.output_text.delta", (event) => (text += event.delta));
    const final = await runner.finalResponse();
    expect(final.output_text).toBe("echo: helper stream");
    expect(text).toBe("echo: helper stream");
  });

  it("runs a function tool loop: function_call → function_call_output → answer", async () => {
    const client = stack.client();
    stack.fake.setReply((body) =>
      body.messages.at(-1).role === "tool"
        ? { content: `It is ${body.messages.at(-1).content} in Paris.` }
        : {
            tool_calls: [
              { id: "call_w1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
            ],
          },
    );
    try {
      const tools = [
        {
          type: "function" as const,
          name: "weather",
          parameters: { type: "object", properties: { city: { type: "string" } } },
          strict: false,
        },
      ];
      const first = await client.responses.create({ model: "fake-model", input: "Weather in Paris?", tools });
      expect(first.output).toEqual([
        {
          id: expect.stringMatching(/^fc_/),
          type: "function_call",
          status: "completed",
          call_id: "call_w1",
          name: "weather",
          arguments: '{"city":"Paris"}',
        },
      ]);
      const second = await client.responses.create({
        model: "fake-model",
        previous_response_id: first.id,
        input: [{ type: "function_call_output", call_id: "call_w1", output: "sunny" }],
        tools,
      });
      expect(second.output_text).toBe("It is sunny in Paris.");
      expect(second.previous_response_id).toBe(first.id);
      const sent = lastChat().messages;
      expect(sent).toEqual([
        { role: "user", content: "Weather in Paris?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_w1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_w1", content: "sunny" },
      ]);
      // The same loop streamed: the call's arguments arrive as function_call_arguments events.
      const streamed = await client.responses.create({
        model: "fake-model",
        input: "Again, streamed",
        tools,
        stream: true,
      });
      const events: any[] = [];
      for await (const event of streamed) events.push(event);
      expect(events.find((e) => e.type === "response.function_call_arguments.done")).toMatchObject({
        arguments: '{"city":"Paris"}',
        name: "weather",
      });
      expect(events.at(-1).response.output).toEqual([
        expect.objectContaining({ type: "function_call", call_id: "call_w1" }),
      ]);
    } finally {
      stack.fake.setReply((body) => ({ content: `echo: ${body.messages.at(-1).content}` }));
    }
  });

  it("chains five responses with previous_response_id, and branches from the second", async () => {
    const client = stack.client();
    const chain = [];
    let previous: string | undefined;
    for (let i = 1; i <= 5; i++) {
      const response = await client.responses.create({
        model: "fake-model",
        input: `turn ${i}`,
        previous_response_id: previous,
      });
      chain.push(response);
      previous = response.id;
    }
    expect(transcript(lastChat())).toEqual([
      "user: turn 1",
      "assistant: echo: turn 1",
      "user: turn 2",
      "assistant: echo: turn 2",
      "user: turn 3",
      "assistant: echo: turn 3",
      "user: turn 4",
      "assistant: echo: turn 4",
      "user: turn 5",
    ]);
    const branchA = await client.responses.create({
      model: "fake-model",
      input: "branch A",
      previous_response_id: chain[1].id,
    });
    expect(transcript(lastChat())).toEqual([
      "user: turn 1",
      "assistant: echo: turn 1",
      "user: turn 2",
      "assistant: echo: turn 2",
      "user: branch A",
    ]);
    const branchB = await client.responses.create({
      model: "fake-model",
      input: "branch B",
      previous_response_id: chain[1].id,
    });
    expect(transcript(lastChat())).toEqual([
      "user: turn 1",
      "assistant: echo: turn 1",
      "user: turn 2",
      "assistant: echo: turn 2",
      "user: branch B",
    ]);
    await client.responses.create({ model: "fake-model", input: "A goes on", previous_response_id: branchA.id });
    expect(transcript(lastChat()).slice(-3)).toEqual([
      "user: branch A",
      "assistant: echo: branch A",
      "user: A goes on",
    ]);
    // The main line is untouched by its branches.
    await client.responses.create({ model: "fake-model", input: "turn 6", previous_response_id: chain[4].id });
    expect(transcript(lastChat()).slice(-3)).toEqual(["user: turn 5", "assistant: echo: turn 5", "user: turn 6"]);
    expect(branchB.id).not.toBe(branchA.id);
  });

  it("continues an older response as a new chain sharing its prefix; the original chain stays as it was", async () => {
    const client = stack.client();
    const r1 = await client.responses.create({ model: "fake-model", input: "turn 1" });
    const r2 = await client.responses.create({ model: "fake-model", input: "turn 2", previous_response_id: r1.id });
    const r3 = await client.responses.create({ model: "fake-model", input: "turn 3", previous_response_id: r2.id });
    const original = sessionOfResponse(r1.id)!;
    expect([sessionOfResponse(r2.id), sessionOfResponse(r3.id)]).toEqual([original, original]);
    const before = await stack.memory.getMessages(original);
    const r3Inputs = await client.responses.inputItems.list(r3.id);

    const other = await client.responses.create({
      model: "fake-model",
      input: "another way",
      previous_response_id: r1.id,
    });
    expect(transcript(lastChat())).toEqual(["user: turn 1", "assistant: echo: turn 1", "user: another way"]);
    expect(other.previous_response_id).toBe(r1.id);
    const forked = sessionOfResponse(other.id)!;
    expect(forked).not.toBe(original);
    expect((await stack.memory.getSession(forked))?.metadata.forkedFrom).toEqual({ sessionId: original, atSeq: 2 });
    expect((await stack.memory.getMessages(forked)).map((m) => m.content)).toEqual([
      "turn 1",
      "echo: turn 1",
      "another way",
      "echo: another way",
    ]);

    // Nothing of the original chain moved: its session, its responses and what continuing its head sends.
    expect(await stack.memory.getMessages(original)).toEqual(before);
    expect((await client.responses.retrieve(r3.id)).output_text).toBe("echo: turn 3");
    expect((await client.responses.inputItems.list(r3.id)).data).toEqual(r3Inputs.data);
    await client.responses.create({ model: "fake-model", input: "turn 4", previous_response_id: r3.id });
    expect(transcript(lastChat()).slice(-4)).toEqual([
      "assistant: echo: turn 2",
      "user: turn 3",
      "assistant: echo: turn 3",
      "user: turn 4",
    ]);
    expect(transcript(lastChat())).not.toContain("user: another way");
    // The new chain's head goes on in its own session.
    const next = await client.responses.create({
      model: "fake-model",
      input: "and on",
      previous_response_id: other.id,
    });
    expect(sessionOfResponse(next.id)).toBe(forked);
  });

  it("continues a response made in a conversation as a new chain: the conversation takes only responses that name it", async () => {
    const client = stack.client();
    const conversation = await client.conversations.create({ items: [{ role: "user", content: "context" }] });
    const inConversation = await client.responses.create({
      model: "fake-model",
      input: "in the conversation",
      conversation: conversation.id,
    });
    const items = await client.conversations.items.list(conversation.id);
    const chained = await client.responses.create({
      model: "fake-model",
      input: "by previous_response_id",
      previous_response_id: inConversation.id,
    });
    expect(transcript(lastChat())).toEqual([
      "user: context",
      "user: in the conversation",
      "assistant: echo: in the conversation",
      "user: by previous_response_id",
    ]);
    expect(chained.conversation ?? null).toBeNull();
    expect(sessionOfResponse(chained.id)).not.toBe(sessionOfResponse(inConversation.id));
    expect((await client.conversations.items.list(conversation.id)).data).toEqual(items.data);
    await client.responses.create({ model: "fake-model", input: "named again", conversation: conversation.id });
    expect(transcript(lastChat())).toEqual([
      "user: context",
      "user: in the conversation",
      "assistant: echo: in the conversation",
      "user: named again",
    ]);
  });

  it("store: false answers without storing", async () => {
    const response = await stack.client().responses.create({ model: "fake-model", input: "forget me", store: false });
    expect((response as unknown as { store: boolean }).store).toBe(false);
    await expect(stack.client().responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
  });

  it("deletes a response: it is gone, and so are its items", async () => {
    const client = stack.client();
    const first = await client.responses.create({ model: "fake-model", input: "keep" });
    const second = await client.responses.create({
      model: "fake-model",
      input: "drop",
      previous_response_id: first.id,
    });
    const res = await stack.request("DELETE", `/v1/responses/${second.id}`);
    expect(await res.json()).toEqual({ id: second.id, object: "response", deleted: true });
    await expect(client.responses.retrieve(second.id)).rejects.toMatchObject({ status: 404 });
    await client.responses.create({ model: "fake-model", input: "next", previous_response_id: first.id });
    expect(transcript(lastChat())).toEqual(["user: keep", "assistant: echo: keep", "user: next"]);
  });

  it("replays an idempotent retry and passes an upstream error back, storing nothing", async () => {
    const headers = { "Idempotency-Key": "resp-retry-1" };
    const body = { model: "fake-model", input: "only once" };
    const calls = stack.fake.chatRequests().length;
    const first = await stack.request("POST", "/v1/responses", { body, headers });
    const again = await stack.request("POST", "/v1/responses", { body, headers });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(((await again.json()) as any).id).toBe(((await first.json()) as any).id);
    expect(stack.fake.chatRequests().length).toBe(calls + 1);

    stack.fake.setReply(() => ({
      status: 400,
      error: { message: "context too long", code: "context_length_exceeded" },
    }));
    try {
      const failed = await stack.request("POST", "/v1/responses", { body: { model: "fake-model", input: "too much" } });
      expect(failed.status).toBe(400);
      expect(((await failed.json()) as any).error).toMatchObject({
        message: "context too long",
        code: "context_length_exceeded",
      });
      const session = failed.headers.get("x-session-id");
      expect(session).toBeNull();
    } finally {
      stack.fake.setReply((b) => ({ content: `echo: ${b.messages.at(-1).content}` }));
    }
  });

  it("refuses what it cannot do with a 400 naming the parameter", async () => {
    const cases: [unknown, string][] = [
      [{ input: "x", previous_response_id: "resp_1", conversation: "conv_1" }, "previous_response_id"],
      [{ input: "x", tools: [{ type: "web_search" }] }, "tools[0].type"],
      [{ input: 7 }, "input"],
      [{ input: [{ role: "user", content: [{ type: "input_audio" }] }] }, "input[0].content[0].type"],
      [{ input: "x", conversation: "not-a-conversation" }, "conversation"],
      [{ input: "x", temperature: 5 }, "temperature"],
    ];
    for (const [body, param] of cases) {
      const res = await stack.request("POST", "/v1/responses", { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      const error = ((await res.json()) as any).error;
      expect(error).toMatchObject({ type: "invalid_request_error", code: "invalid_request", param });
    }
    const missing = await stack.request("POST", "/v1/responses", {
      body: { input: "x", previous_response_id: "resp_0123" },
    });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as any).error).toMatchObject({ code: "not_found", param: "previous_response_id" });
  });
});

describe("ownership", () => {
  it("another user's response or conversation is not found, everywhere", async () => {
    const owned = await startStack({ apiKeys: { "sk-alice": "alice", "sk-bob": "bob" } });
    try {
      const alice = owned.client("sk-alice");
      const bob = owned.client("sk-bob");
      const response = await alice.responses.create({ model: "fake-model", input: "secret" });
      const conversation = await alice.conversations.create({ items: [{ role: "user", content: "private" }] });
      await expect(bob.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
      await expect(bob.responses.inputItems.list(response.id)).rejects.toMatchObject({ status: 404 });
      await expect(bob.responses.delete(response.id)).rejects.toMatchObject({ status: 404 });
      await expect(
        bob.responses.create({ model: "fake-model", input: "x", previous_response_id: response.id }),
      ).rejects.toMatchObject({ status: 404 });
      await expect(
        bob.responses.create({ model: "fake-model", input: "x", conversation: conversation.id }),
      ).rejects.toMatchObject({ status: 404 });
      await expect(bob.conversations.retrieve(conversation.id)).rejects.toMatchObject({ status: 404 });
      await expect(bob.conversations.items.list(conversation.id)).rejects.toMatchObject({ status: 404 });
      await expect(bob.conversations.delete(conversation.id)).rejects.toMatchObject({ status: 404 });
      expect((await alice.conversations.items.list(conversation.id)).data).toHaveLength(1);
      expect(owned.fake.chatRequests()).toHaveLength(1);
    } finally {
      await owned.close();
    }
  });
});
