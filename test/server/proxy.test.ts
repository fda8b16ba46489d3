import { randomUUID } from "node:crypto";
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Stack, startStack, transcript } from "./_stack.js";

let stack: Stack;
afterEach(async () => {
  await stack?.close();
});

async function turn(id: string | undefined, content: string, extra: { system?: string } = {}) {
  const messages = [
    ...(extra.system ? [{ role: "system" as const, content: extra.system }] : []),
    { role: "user" as const, content },
  ];
  const { data, response } = await stack
    .client()
    .chat.completions.create({ model: "fake", messages }, { headers: id ? { "X-Session-ID": id } : {} })
    .withResponse();
  return { data, sessionId: response.headers.get("x-session-id") as string, response };
}

describe("chat completions through threadkeep", () => {
  beforeEach(async () => {
    stack = await startStack();
  });

  it("answers with the upstream's completion and a new session id when none is sent", async () => {
    const first = await turn(undefined, "hello");
    expect(first.data.choices[0].message.content).toBe("echo: hello");
    expect(first.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    const second = await turn(undefined, "hello again");
    expect(second.sessionId).not.toBe(first.sessionId);
  });

  it("sends the first turn with the second turn's upstream request", async () => {
    const { sessionId } = await turn(undefined, "Create a task: buy groceries");
    await turn(sessionId, "Make that due tomorrow");
    const second = stack.fake.chatRequests()[1].body;
    expect(transcript(second)).toEqual([
      "user: Create a task: buy groceries",
      "assistant: echo: Create a task: buy groceries",
      "user: Make that due tomorrow",
    ]);
  });

  it("keeps the request's system messages first and does not store them", async () => {
    const { sessionId } = await turn(undefined, "one", { system: "You are terse." });
    await turn(sessionId, "two", { system: "You are terse." });
    expect(transcript(stack.fake.chatRequests()[1].body)).toEqual([
      "system: You are terse.",
      "user: one",
      "assistant: echo: one",
      "user: two",
    ]);
    const stored = await stack.memory.getMessages(sessionId);
    expect(stored.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
  });

  it("keeps 20 consecutive turns within the window", async () => {
    await stack.close();
    stack = await startStack({ memoryOptions: { window: 6 } });
    const id = randomUUID();
    for (let i = 1; i <= 20; i++) await turn(id, `message ${i}`);
    const requests = stack.fake.chatRequests();
    expect(requests).toHaveLength(20);
    for (const [i, request] of requests.entries()) {
      const history = request.body.messages.slice(0, -1);
      expect(history.length).toBe(Math.min(6, 2 * i));
      expect(request.body.messages.at(-1)).toEqual({ role: "user", content: `message ${i + 1}` });
    }
    expect(transcript(requests[19].body).slice(0, 2)).toEqual(["user: message 17", "assistant: echo: message 17"]);
    expect(await stack.memory.getMessages(id)).toHaveLength(40);
  });

  it("stores only the new turn when a client re-sends the whole history (OpenWebUI)", async () => {
    const client = stack.client();
    const id = randomUUID();
    const history: { role: "user" | "assistant"; content: string }[] = [];
    for (const text of ["first", "second", "third"]) {
      history.push({ role: "user", content: text });
      const reply = await client.chat.completions.create(
        { model: "fake", messages: history },
        { headers: { "X-Session-ID": id } },
      );
      history.push({ role: "assistant", content: reply.choices[0].message.content ?? "" });
    }
    const stored = await stack.memory.getMessages(id);
    expect(stored.map((m) => m.content)).toEqual([
      "first",
      "echo: first",
      "second",
      "echo: second",
      "third",
      "echo: third",
    ]);
    // The model saw each message once.
    expect(transcript(stack.fake.chatRequests()[2].body)).toEqual([
      "user: first",
      "assistant: echo: first",
      "user: second",
      "assistant: echo: second",
      "user: third",
    ]);
  });

  it("adopts a client's earlier history for a session it has not seen", async () => {
    const id = randomUUID();
    await stack.client().chat.completions.create(
      {
        model: "fake",
        messages: [
          { role: "user", content: "earlier question" },
          { role: "assistant", content: "earlier answer" },
          { role: "user", content: "now" },
        ],
      },
      { headers: { "X-Session-ID": id } },
    );
    expect((await stack.memory.getMessages(id)).map((m) => m.content)).toEqual([
      "earlier question",
      "earlier answer",
      "now",
      "echo: now",
    ]);
  });

  it("keeps tool calls paired with their results across turns", async () => {
    const call = {
      id: "call_1",
      type: "function",
      function: { name: "get_weather", arguments: '{"city":"Oslo"}' },
    };
    stack.fake.setReply((_body, index) => (index === 0 ? { tool_calls: [call] } : { content: "It is cold." }));
    const { sessionId } = await turn(undefined, "Weather in Oslo?");
    await stack
      .client()
      .chat.completions.create(
        { model: "fake", messages: [{ role: "tool", tool_call_id: "call_1", content: "-3°C" }] },
        { headers: { "X-Session-ID": sessionId } },
      );
    const sent = stack.fake.chatRequests()[1].body.messages;
    expect(sent.map((m: { role: string }) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(sent[1].tool_calls).toEqual([call]);
    const stored = await stack.memory.getMessages(sessionId);
    expect(stored.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
  });

  it("uses the server's upstream key and never forwards the client's", async () => {
    await stack
      .client("sk-client-secret")
      .chat.completions.create({ model: "fake", messages: [{ role: "user", content: "hi" }] });
    const headers = stack.fake.chatRequests()[0].headers;
    expect(headers.authorization).toBe("Bearer sk-upstream-secret");
    expect(JSON.stringify(headers)).not.toContain("sk-client-secret");
  });

  it("stores 50 concurrent turns on one session in arrival order, each reply after its question", async () => {
    const id = randomUUID();
    const client = stack.client();
    stack.fake.setReply((body) => ({ content: `answer to ${body.messages.at(-1).content}`, delayMs: 1 }));
    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        client.chat.completions.create(
          { model: "fake", messages: [{ role: "user", content: `q${i}` }] },
          { headers: { "X-Session-ID": id } },
        ),
      ),
    );
    const stored = await stack.memory.getMessages(id, { limit: 1000 });
    expect(stored).toHaveLength(100);
    const arrival = stack.fake.chatRequests().map((r) => r.body.messages.at(-1).content);
    for (let i = 0; i < 50; i++) {
      expect(stored[2 * i]).toMatchObject({ role: "user", content: arrival[i], seq: 2 * i + 1 });
      expect(stored[2 * i + 1]).toMatchObject({ role: "assistant", content: `answer to ${arrival[i]}` });
    }
    // Each turn saw every earlier turn: the upstream got them strictly one after another.
    const sizes = stack.fake.chatRequests().map((r) => r.body.messages.length);
    expect(sizes.slice(0, 10)).toEqual([1, 3, 5, 7, 9, 11, 13, 15, 17, 19]);
  });

  it("replays a turn retried with the same Idempotency-Key without a second model call or append", async () => {
    const id = randomUUID();
    stack.fake.setReply(() => ({ content: "once", delayMs: 50 }));
    const send = () =>
      stack
        .client()
        .chat.completions.create(
          { model: "fake", messages: [{ role: "user", content: "charge me" }] },
          { headers: { "X-Session-ID": id, "Idempotency-Key": "k-1" } },
        )
        .withResponse();
    // The second arrives while the first is still running, the third after it finished.
    const [a, b] = await Promise.all([send(), send()]);
    const c = await send();
    expect(stack.fake.chatRequests()).toHaveLength(1);
    expect(b.data).toEqual(a.data);
    expect(c.data).toEqual(a.data);
    expect(c.response.headers.get("idempotent-replayed")).toBe("true");
    expect(c.response.headers.get("x-session-id")).toBe(id);
    expect(await stack.memory.getMessages(id)).toHaveLength(2);
  });

  it("answers with the upstream's JSON bytes as they came, and replays the same bytes", async () => {
    // Pretty-printed, an escape JSON.stringify would not write, and a key order of its own: what a
    // re-serialisation would change.
    const completion = {
      id: "chatcmpl-1",
      object: "chat.completion",
      created: 1,
      model: "fake",
      choices: [{ index: 0, message: { role: "assistant", content: "caf\u00e9 \u2014 done" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
    };
    const text = JSON.stringify(completion, null, 2).replace("café — done", "caf\\u00e9 \\u2014 done");
    const upstream = createHttpServer((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end(text));
    });
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    try {
      await stack.close();
      stack = await startStack({ upstream: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1` });
      const id = randomUUID();
      const send = () =>
        stack.request("POST", "/v1/chat/completions", {
          headers: { "X-Session-ID": id, "Idempotency-Key": "k-bytes" },
          body: { model: "fake", messages: [{ role: "user", content: "hi" }] },
        });
      const first = await send();
      expect(first.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(await first.text()).toBe(text);
      const again = await send();
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(again.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(await again.text()).toBe(text);
      const stored = await stack.memory.getMessages(id);
      expect(stored.map((m) => m.content)).toEqual(["hi", "café — done"]);
    } finally {
      upstream.closeAllConnections();
      await new Promise((resolve) => upstream.close(resolve));
    }
  });

  it("refuses an Idempotency-Key reused for a different request", async () => {
    const id = randomUUID();
    const headers = { "X-Session-ID": id, "Idempotency-Key": "k-2" };
    await stack.request("POST", "/v1/chat/completions", {
      headers,
      body: { model: "m", messages: [{ role: "user", content: "a" }] },
    });
    const res = await stack.request("POST", "/v1/chat/completions", {
      headers,
      body: { model: "m", messages: [{ role: "user", content: "b" }] },
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({
      code: "invalid_request",
      param: "Idempotency-Key",
    });
  });

  it("fills in the configured model when a request names none", async () => {
    await stack.close();
    stack = await startStack({ model: "llama3.2" });
    const res = await stack.request("POST", "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "hi" }] },
    });
    expect(res.status).toBe(200);
    expect(stack.fake.chatRequests()[0].body.model).toBe("llama3.2");
  });
});
