import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { chat, errorOf, metricValue } from "./_error-helpers.js";
import { type Stack, startStack } from "./_stack.js";

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

describe("chat errors", () => {
  it("answers a malformed session id with 400 invalid_session_id and stores nothing", async () => {
    stack = await startStack();
    const res = await stack.request("POST", "/v1/chat/completions", {
      headers: { "x-session-id": "not-a-uuid" },
      body: chat(),
    });
    expect(res.status).toBe(400);
    expect(await errorOf(res)).toMatchObject({ type: "invalid_request_error", code: "invalid_session_id" });
    expect(stack.fake.chatRequests()).toHaveLength(0);
  });

  it("requires a valid threadkeep API key when keys are configured (401 invalid_api_key)", async () => {
    stack = await startStack({ apiKeys: { "tk-alice": "alice" } });
    const attempts: Record<string, string>[] = [
      {},
      { authorization: "Bearer wrong" },
      { authorization: "Basic tk-alice" },
    ];
    for (const headers of attempts) {
      const res = await stack.request("POST", "/v1/chat/completions", { headers, body: chat() });
      expect(res.status).toBe(401);
      expect(await errorOf(res)).toMatchObject({ type: "authentication_error", code: "invalid_api_key" });
    }
    const sessions = await stack.request("GET", "/v1/sessions");
    expect(sessions.status).toBe(401);
    const ok = await stack.client("tk-alice").chat.completions.create(chat());
    expect(ok.choices[0].message.content).toBe("echo: hi");
    expect(stack.fake.chatRequests()[0].headers.authorization).toBe("Bearer sk-upstream-secret");
  });

  it("passes an upstream error back with its status and body, storing nothing", async () => {
    stack = await startStack();
    stack.fake.setReply(() => ({
      status: 400,
      error: { message: "model not found", type: "invalid_request_error", code: "model_not_found" },
    }));
    const id = randomUUID();
    const res = await stack.request("POST", "/v1/chat/completions", {
      headers: { "x-session-id": id },
      body: chat(),
    });
    expect(res.status).toBe(400);
    expect(res.headers.get("x-session-id")).toBe(id);
    expect(await res.json()).toEqual({
      error: { message: "model not found", type: "invalid_request_error", code: "model_not_found" },
    });
    await expect(stack.memory.getSession(id)).rejects.toMatchObject({ code: "session_not_found" });
    expect(await metricValue(stack, 'threadkeep_turns_total{outcome="upstream_error",stream="false"}')).toBe(1);
  });

  it("keeps an existing session untouched when the upstream fails", async () => {
    stack = await startStack();
    const id = randomUUID();
    await stack.client().chat.completions.create(chat("first"), { headers: { "X-Session-ID": id } });
    stack.fake.setReply(() => ({ status: 503, error: { message: "overloaded" } }));
    const res = await stack.request("POST", "/v1/chat/completions", {
      headers: { "x-session-id": id },
      body: chat("second"),
    });
    expect(res.status).toBe(503);
    expect((await stack.memory.getMessages(id)).map((m) => m.content)).toEqual(["first", "echo: first"]);
  });

  it("answers 502 upstream_error when the upstream cannot be reached", async () => {
    stack = await startStack({ upstream: "http://127.0.0.1:1/v1" });
    const res = await stack.request("POST", "/v1/chat/completions", { body: chat() });
    expect(res.status).toBe(502);
    expect(await errorOf(res)).toMatchObject({ type: "server_error", code: "upstream_error" });
    expect(res.headers.get("x-session-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("answers 503 upstream_not_configured without an upstream, while the session API works", async () => {
    stack = await startStack({ noUpstream: true });
    const res = await stack.request("POST", "/v1/chat/completions", { body: chat() });
    expect(res.status).toBe(503);
    expect(await errorOf(res)).toMatchObject({ code: "upstream_not_configured" });
    const id = randomUUID();
    const added = await stack.request("POST", `/v1/sessions/${id}/messages`, {
      body: { messages: [{ role: "user", content: "kept" }] },
    });
    expect(added.status).toBe(201);
    const listed = await stack.request("GET", `/v1/sessions/${id}/messages`);
    expect(((await listed.json()) as { data: { content: string }[] }).data[0].content).toBe("kept");
  });

  it("rejects a body over the limit with 413 payload_too_large", async () => {
    stack = await startStack({ bodyLimit: 1024 });
    const id = randomUUID();
    const res = await stack.request("POST", "/v1/chat/completions", {
      headers: { "x-session-id": id },
      body: chat("x".repeat(2000)),
    });
    expect(res.status).toBe(413);
    expect(await errorOf(res)).toMatchObject({ code: "payload_too_large" });
    expect(res.headers.get("x-session-id")).toBe(id);
  });

  it("rejects a non-JSON content type with 415 and bad JSON with 400", async () => {
    stack = await startStack();
    const text = await stack.request("POST", "/v1/chat/completions", {
      headers: { "content-type": "text/plain" },
      body: "hello",
    });
    expect(text.status).toBe(415);
    expect(await errorOf(text)).toMatchObject({ code: "unsupported_media_type" });
    const bad = await stack.request("POST", "/v1/chat/completions", { body: "{not json" });
    expect(bad.status).toBe(400);
    expect(await errorOf(bad)).toMatchObject({ code: "invalid_request", type: "invalid_request_error" });
  });

  it("validates the body and names the offending field", async () => {
    stack = await startStack();
    const cases: [unknown, string, string][] = [
      [{ model: "m" }, "invalid_request", "messages"],
      [{ model: "m", messages: [] }, "invalid_request", "messages"],
      [{ model: 5, messages: [{ role: "user", content: "x" }] }, "invalid_request", "model"],
      [{ model: "m", stream: "yes", messages: [{ role: "user", content: "x" }] }, "invalid_request", "stream"],
      [
        {
          model: "m",
          messages: [
            { role: "user", content: "x" },
            { role: "wizard", content: "y" },
          ],
        },
        "invalid_message",
        "messages[1].role",
      ],
      [{ model: "m", messages: [{ role: "tool", content: "x" }] }, "invalid_message", "messages[0].tool_call_id"],
    ];
    for (const [body, code, param] of cases) {
      const res = await stack.request("POST", "/v1/chat/completions", { body });
      expect(res.status).toBe(400);
      expect(await errorOf(res)).toMatchObject({ code, param });
    }
    expect(stack.fake.chatRequests()).toHaveLength(0);
  });

  it("answers 429 session_busy when a turn waits too long for the one before it", async () => {
    stack = await startStack({ memoryOptions: { turnWaitMs: 50 } });
    stack.fake.setReply(() => ({ content: "slow", delayMs: 400 }));
    const id = randomUUID();
    const send = () =>
      stack!.request("POST", "/v1/chat/completions", { headers: { "x-session-id": id }, body: chat() });
    const first = send();
    await new Promise((r) => setTimeout(r, 20));
    const second = await send();
    expect(second.status).toBe(429);
    expect(await errorOf(second)).toMatchObject({ code: "session_busy", type: "rate_limit_error" });
    expect((await first).status).toBe(200);
    expect(await stack.memory.getMessages(id)).toHaveLength(2);
  });

  it("keeps the lease of a turn that runs past its lifetime (heartbeat): the next turn waits, both are saved", async () => {
    stack = await startStack({ memoryOptions: { leaseTtlMs: 100 } });
    stack.fake.setReply((body) => ({
      content: `re: ${body.messages.at(-1).content}`,
      delayMs: body.messages.at(-1).content === "slow" ? 400 : 0,
    }));
    const id = randomUUID();
    const send = (content: string) =>
      stack!.request("POST", "/v1/chat/completions", {
        headers: { "x-session-id": id },
        body: chat(content),
      });
    const slow = send("slow");
    await new Promise((r) => setTimeout(r, 20));
    const fast = await send("fast");
    expect(fast.headers.get("x-threadkeep-warning")).toBeNull();
    const late = await slow;
    expect(late.status).toBe(200);
    expect(late.headers.get("x-threadkeep-warning")).toBeNull();
    expect((await stack.memory.getMessages(id)).map((m) => m.content)).toEqual([
      "slow",
      "re: slow",
      "fast",
      "re: fast",
    ]);
  });

  it("answers unknown routes with an OpenAI-style 404", async () => {
    stack = await startStack();
    const res = await stack.request("GET", "/v1/nothing-here");
    expect(res.status).toBe(404);
    expect(await errorOf(res)).toMatchObject({ code: "not_found", type: "invalid_request_error" });
  });
});
