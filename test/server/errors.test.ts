import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { StoreUnavailableError, ThreadkeepError } from "../../src/core/errors.js";
import type { SessionStore } from "../../src/core/types.js";
import { createMemoryStore } from "../../src/stores/memory.js";
import { type Stack, startStack } from "./_stack.js";

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const chat = (content = "hi") => ({ model: "m", messages: [{ role: "user" as const, content }] });

/** A real memory store whose named methods fail with store_unavailable while listed in `failing`. */
function flakyStore(
  makeError: (method: string) => Error = (method) => new StoreUnavailableError(`${method} failed (test)`),
): { store: SessionStore; failing: Set<string> } {
  const inner = createMemoryStore();
  const failing = new Set<string>();
  const store = new Proxy(inner, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (failing.has(String(property))) return Promise.reject(makeError(String(property)));
        return value.apply(target, args);
      };
    },
  });
  return { store, failing };
}

async function errorOf(res: Response) {
  return ((await res.json()) as { error: Record<string, unknown> }).error;
}

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
    expect(await metricValue(stack, 'threadkeep_turns_total{outcome="upstream_error",stream="false"}')).toBe(
      1,
    );
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
      [
        { model: "m", stream: "yes", messages: [{ role: "user", content: "x" }] },
        "invalid_request",
        "stream",
      ],
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
      [
        { model: "m", messages: [{ role: "tool", content: "x" }] },
        "invalid_message",
        "messages[0].tool_call_id",
      ],
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
    expect((await stack.memory.getMessages(id)).map((m) => m.content)).toEqual(["slow", "re: slow", "fast", "re: fast"]);
  });

  it("answers unknown routes with an OpenAI-style 404", async () => {
    stack = await startStack();
    const res = await stack.request("GET", "/v1/nothing-here");
    expect(res.status).toBe(404);
    expect(await errorOf(res)).toMatchObject({ code: "not_found", type: "invalid_request_error" });
  });
});

describe("store trouble", () => {
  it("goes on without history when the store is down while loading (X-Threadkeep-Warning: context-unavailable)", async () => {
    const { store, failing } = flakyStore();
    stack = await startStack({ store });
    const id = randomUUID();
    await stack.client().chat.completions.create(chat("remember me"), { headers: { "X-Session-ID": id } });
    failing.add("getSession").add("getMessages");
    const { data, response } = await stack
      .client()
      .chat.completions.create(
        {
          model: "m",
          messages: [
            { role: "system", content: "sys" },
            { role: "user", content: "now" },
          ],
        },
        { headers: { "X-Session-ID": id } },
      )
      .withResponse();
    expect(data.choices[0].message.content).toBe("echo: now");
    // The save is one owner-scoped append that reads nothing first, so the turn is still stored.
    expect(response.headers.get("x-threadkeep-warning")).toBe("context-unavailable");
    expect(response.headers.get("x-session-id")).toBe(id);
    expect(stack.fake.chatRequests()[1].body.messages).toEqual([
      { role: "system", content: "sys" },
      { role: "user", content: "now" },
    ]);
    expect(await metricValue(stack, 'threadkeep_errors_total{code="context_unavailable"}')).toBe(1);
  });

  it("answers without history when the session's stored data cannot be read (store_corrupt)", async () => {
    const { store, failing } = flakyStore((method) => new ThreadkeepError("store_corrupt", `${method}: unreadable (test)`));
    stack = await startStack({ store });
    const id = randomUUID();
    await stack.client().chat.completions.create(chat("one"), { headers: { "X-Session-ID": id } });
    failing.add("getMessages");
    const { data, response } = await stack
      .client()
      .chat.completions.create(chat("two"), { headers: { "X-Session-ID": id } })
      .withResponse();
    expect(response.status).toBe(200);
    expect(data.choices[0].message.content).toBe("echo: two");
    expect(response.headers.get("x-threadkeep-warning")).toBe("context-unavailable");
    expect(stack.fake.chatRequests()[1].body.messages).toEqual([{ role: "user", content: "two" }]);
  });

  it("stores the turn when only the history read failed", async () => {
    const { store, failing } = flakyStore();
    stack = await startStack({ store });
    const id = randomUUID();
    await stack.client().chat.completions.create(chat("one"), { headers: { "X-Session-ID": id } });
    failing.add("getMessages");
    const { response } = await stack
      .client()
      .chat.completions.create(chat("two"), { headers: { "X-Session-ID": id } })
      .withResponse();
    expect(response.headers.get("x-threadkeep-warning")).toBe("context-unavailable");
    failing.clear();
    expect((await stack.memory.getMessages(id)).map((m) => m.content)).toEqual([
      "one",
      "echo: one",
      "two",
      "echo: two",
    ]);
  });

  it("returns the reply with X-Threadkeep-Warning: not-saved when the store is down while saving", async () => {
    const { store, failing } = flakyStore();
    stack = await startStack({ store });
    const id = randomUUID();
    await stack.client().chat.completions.create(chat("one"), { headers: { "X-Session-ID": id } });
    failing.add("appendMessages");
    const { data, response } = await stack
      .client()
      .chat.completions.create(chat("two"), { headers: { "X-Session-ID": id } })
      .withResponse();
    expect(data.choices[0].message.content).toBe("echo: two");
    expect(response.headers.get("x-threadkeep-warning")).toBe("not-saved");
    failing.clear();
    expect(await stack.memory.getMessages(id)).toHaveLength(2);
  });

  it("says not-saved at the end of a stream whose turn could not be saved", async () => {
    const { store, failing } = flakyStore();
    stack = await startStack({ store });
    failing.add("appendMessages");
    const res = await stack.request("POST", "/v1/chat/completions", { body: { ...chat("s"), stream: true } });
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(text).toContain(": x-threadkeep-warning: not-saved");
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
  });

  it("runs the turn without the lease when the store cannot grant it", async () => {
    const { store, failing } = flakyStore();
    stack = await startStack({ store });
    failing.add("acquireLease");
    const { data, response } = await stack.client().chat.completions.create(chat("x")).withResponse();
    expect(data.choices[0].message.content).toBe("echo: x");
    expect(response.headers.get("x-threadkeep-warning")).toBeNull();
    failing.clear();
    expect(await stack.memory.getMessages(response.headers.get("x-session-id") as string)).toHaveLength(2);
  });

  it("answers 503 store_unavailable on the session API when the store is down", async () => {
    const { store, failing } = flakyStore();
    stack = await startStack({ store });
    failing.add("listSessions");
    const res = await stack.request("GET", "/v1/sessions");
    expect(res.status).toBe(503);
    expect(await errorOf(res)).toMatchObject({ code: "store_unavailable", type: "server_error" });
  });

  it("answers an unexpected failure with an opaque 500 internal_error", async () => {
    const { store } = flakyStore();
    (store as unknown as { listSessions: () => never }).listSessions = () => {
      throw new TypeError("secret internals");
    };
    stack = await startStack({
      store: new Proxy(store, {
        get: (t, p) =>
          p === "listSessions" ? () => Promise.reject(new TypeError("secret internals")) : Reflect.get(t, p),
      }),
    });
    const res = await stack.request("GET", "/v1/sessions");
    expect(res.status).toBe(500);
    const body = await errorOf(res);
    expect(body).toMatchObject({ code: "internal_error", type: "server_error" });
    expect(JSON.stringify(body)).not.toContain("secret");
  });
});

async function metricValue(stack: Stack, series: string): Promise<number> {
  const text = await (await stack.request("GET", "/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(" ").at(-1)) : 0;
}
