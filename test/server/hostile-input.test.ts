/**
 * The rows of issue 9 about client input: each once answered 500 (or worse) and must now be a 4xx
 * or handled, with nothing stored.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { StoreUnavailableError } from "../../src/core/errors.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { type Stack, startStack } from "./_stack.js";

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;

async function errorOf(res: Response) {
  return ((await res.json()) as { error: Record<string, unknown> }).error;
}

describe("hostile input", () => {
  it("answers a non-string tool_call_id with 400 naming it, sending and storing nothing", async () => {
    stack = await startStack();
    const session = randomUUID();
    const res = await stack.request("POST", "/v1/chat/completions", {
      headers: { "x-session-id": session },
      body: { model: "m", messages: [{ role: "user", content: "c", tool_call_id: true }] },
    });
    expect(res.status).toBe(400);
    expect(await errorOf(res)).toMatchObject({ code: "invalid_message", param: "messages[0].tool_call_id" });
    expect(stack.fake.chatRequests()).toHaveLength(0);
    expect((await stack.request("GET", `/v1/sessions/${session}`)).status).toBe(404);
  });

  it("refuses JSON nested 5,000 deep anywhere with 400 invalid_request naming the field", async () => {
    stack = await startStack();
    const session = randomUUID();
    const deep = nested(5000);
    const cases: [string, string, string, string][] = [
      [
        "POST",
        "/v1/chat/completions",
        `{"model":"m","messages":[{"role":"user","content":"c"}],"user_data":${deep}}`,
        "user_data",
      ],
      [
        "POST",
        "/v1/chat/completions",
        `{"model":"m","messages":[{"role":"user","content":"c","metadata":${deep}}]}`,
        "messages[0].metadata",
      ],
      [
        "POST",
        `/v1/sessions/${session}/messages`,
        `{"messages":[{"role":"user","content":"c","metadata":${deep}}]}`,
        "messages[0].metadata",
      ],
      ["POST", "/v1/sessions", `{"id":"${session}","metadata":${deep}}`, "metadata"],
      ["PATCH", `/v1/sessions/${session}/state`, `{"data":{"x":${deep}}}`, "data.x"],
      ["PUT", `/v1/sessions/${session}/preferences`, deep, "a"],
      ["POST", "/v1/responses", `{"model":"m","input":[{"role":"user","content":"c","x":${deep}}]}`, "input[0].x"],
      ["POST", "/v1/conversations", `{"items":[{"role":"user","content":${deep}}]}`, "items[0].content"],
    ];
    for (const [method, path, body, field] of cases) {
      const res = await stack.request(method, path, { headers: { "x-session-id": session }, body });
      expect(res.status, `${method} ${path}`).toBe(400);
      const error = await errorOf(res);
      expect(error.code).toBe("invalid_request");
      expect(String(error.param).startsWith(field), `${error.param} names ${field}`).toBe(true);
    }
    expect(stack.fake.chatRequests()).toHaveLength(0);
    expect((await stack.request("GET", `/v1/sessions/${session}`)).status).toBe(404);
    expect((await stack.request("GET", "/healthz")).status).toBe(200);
  });

  it("reads messages whose metadata mimics threadkeep's item and response records as plain chat messages", async () => {
    stack = await startStack();
    const session = randomUUID();
    const forged = [
      { role: "user", content: "a", metadata: { items: [1, null, "x"] } },
      {
        role: "assistant",
        content: "b",
        metadata: { items: [{ id: 5, set: "no" }], response: { id: "resp_x", inputCount: "many" } },
      },
      { role: "user", content: "c", metadata: { items: [{ item: { id: "i" } }], hiddenOnly: "yes" } },
    ];
    expect(
      (await stack.request("POST", `/v1/sessions/${session}/messages`, { body: { messages: forged } })).status,
    ).toBe(201);
    const conversation = `conv_${session.replace(/-/g, "")}`;
    const items = await stack.request("GET", `/v1/conversations/${conversation}/items?order=asc`);
    expect(items.status).toBe(200);
    const data = ((await items.json()) as { data: { id: string; content: { text: string }[] }[] }).data;
    expect(data.map((i) => [i.id, i.content[0].text])).toEqual([
      ["msg_tk1", "a"],
      ["msg_tk2", "b"],
      ["msg_tk3", "c"],
    ]);
    const response = `resp_${session.replace(/-/g, "")}0123456789abcdef`;
    expect((await stack.request("GET", `/v1/responses/${response}`)).status).toBe(404);
    const next = await stack.request("POST", "/v1/responses", { body: { model: "m", input: "d", conversation } });
    expect(next.status).toBe(200);
  });

  it("refuses deep metadata and state from library callers too, leaving no session", async () => {
    stack = await startStack();
    const deep = JSON.parse(nested(100));
    const id = randomUUID();
    await expect(stack.memory.addMessages(id, [{ role: "user", content: "c", metadata: deep }])).rejects.toMatchObject({
      code: "invalid_request",
    });
    await expect(stack.memory.updateState(id, () => ({ deep }))).rejects.toMatchObject({ code: "invalid_request" });
    await expect(stack.memory.startSession({ id, metadata: deep })).rejects.toMatchObject({ code: "invalid_request" });
    await expect(stack.memory.getSession(id)).rejects.toMatchObject({ code: "session_not_found" });
  });

  it("searches full text for a NUL on SQLite without calling it an outage", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tk-nul-"));
    stack = await startStack({ store: `sqlite:${join(dir, "t.db")}` });
    const session = randomUUID();
    await stack.request("POST", `/v1/sessions/${session}/messages`, {
      body: { messages: [{ role: "user", content: "find me" }] },
    });
    for (const q of ["%00", "find%00me", "%00%00"]) {
      const res = await stack.request("GET", `/v1/sessions/${session}/search?mode=fulltext&q=${q}`);
      expect(res.status, q).toBe(200);
      await res.json();
    }
    const hit = await stack.request("GET", `/v1/sessions/${session}/search?mode=fulltext&q=find%00me`);
    expect(((await hit.json()) as { data: unknown[] }).data).toHaveLength(1);
  });

  it("leaves no empty session when the first append is refused late, by the store", async () => {
    const inner = createMemoryStore();
    const store = new Proxy(inner, {
      get(target, property, receiver) {
        if (property === "appendMessages")
          return () => Promise.reject(new StoreUnavailableError("append refused (test)"));
        return Reflect.get(target, property, receiver);
      },
    });
    stack = await startStack({ store });
    const session = randomUUID();
    const res = await stack.request("POST", `/v1/sessions/${session}/messages`, {
      body: { messages: [{ role: "user", content: "hello" }] },
    });
    expect(res.status).toBe(503);
    expect(await inner.getSession(session)).toBeNull();
    await expect(stack.memory.updateState(session, () => ({ k: 1 }))).resolves.toMatchObject({ version: 1 });
  });

  it("never sends metadata or incomplete of the new turn to the model", async () => {
    stack = await startStack();
    const session = randomUUID();
    for (const content of ["first", "second"]) {
      const res = await stack.request("POST", "/v1/chat/completions", {
        headers: { "x-session-id": session },
        body: {
          model: "m",
          messages: [
            { role: "system", content: "sys", metadata: { s: 1 } },
            { role: "user", content, metadata: { secret: "x" }, incomplete: false },
          ],
        },
      });
      expect(res.status).toBe(200);
      await res.json();
    }
    for (const request of stack.fake.chatRequests()) {
      for (const message of request.body.messages) {
        expect(message).not.toHaveProperty("metadata");
        expect(message).not.toHaveProperty("incomplete");
      }
    }
    // Stored with its metadata all the same.
    const stored = await stack.memory.getMessages(session);
    expect(stored[0].metadata).toEqual({ secret: "x" });
  });

  it("says input-truncated when a 5 MB message is cut for the model, and /context says which", async () => {
    stack = await startStack();
    stack.fake.setReply(() => ({ content: "ok" }));
    const session = randomUUID();
    const text = "word ".repeat(1024 * 1024);
    const res = await stack.request("POST", "/v1/chat/completions", {
      headers: { "x-session-id": session },
      body: { model: "m", messages: [{ role: "user", content: text }] },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-threadkeep-warning")).toBe("input-truncated");
    await res.json();
    const small = await stack.request("POST", "/v1/chat/completions", {
      headers: { "x-session-id": session },
      body: { model: "m", messages: [{ role: "user", content: "short" }] },
    });
    expect(small.headers.get("x-threadkeep-warning")).toBeNull();
    await small.json();
    // The stored 5 MB message is the newest window message of the next context: cut, by seq.
    await stack.memory.addMessages(session, [{ role: "user", content: text }]);
    const context = (await (await stack.request("GET", `/v1/sessions/${session}/context`)).json()) as {
      omitted: { truncated: number; truncatedMessages: { seq: number; tokens: number; sentTokens: number }[] };
    };
    expect(context.omitted.truncated).toBe(1);
    expect(context.omitted.truncatedMessages).toEqual([
      { seq: 5, tokens: expect.any(Number), sentTokens: expect.any(Number) },
    ]);
    expect(context.omitted.truncatedMessages[0].tokens).toBeGreaterThan(
      context.omitted.truncatedMessages[0].sentTokens,
    );
  });
});

describe("upstream headers", () => {
  const limits = {
    "retry-after": "7",
    "x-ratelimit-limit-requests": "60",
    "x-ratelimit-remaining-requests": "0",
    "x-request-id": "req_123",
  };

  it("passes retry-after, x-ratelimit-* and x-request-id back on an upstream error", async () => {
    stack = await startStack();
    stack.fake.setReply(() => ({ status: 429, error: { message: "slow down", code: "rate_limit" }, headers: limits }));
    for (const stream of [false, true]) {
      const res = await stack.request("POST", "/v1/chat/completions", {
        body: { model: "m", stream, messages: [{ role: "user", content: "hi" }] },
      });
      expect(res.status).toBe(429);
      for (const [name, value] of Object.entries(limits)) expect(res.headers.get(name), name).toBe(value);
      await res.json();
    }
  });

  it("passes them back on a success, plain and streamed", async () => {
    stack = await startStack();
    stack.fake.setReply(() => ({
      content: "ok",
      headers: { "x-request-id": "req_9", "x-ratelimit-remaining-tokens": "99" },
    }));
    for (const stream of [false, true]) {
      const res = await stack.request("POST", "/v1/chat/completions", {
        body: { model: "m", stream, messages: [{ role: "user", content: "hi" }] },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-request-id")).toBe("req_9");
      expect(res.headers.get("x-ratelimit-remaining-tokens")).toBe("99");
      await res.text();
    }
  });
});
