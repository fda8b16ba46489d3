import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Stack, startStack } from "./_stack.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ apiKeys: { "tk-alice": "alice", "tk-bob": "bob" } });
});
afterAll(async () => {
  await stack.close();
});

const as = (key: string) => ({ authorization: `Bearer ${key}` });
async function call(key: string, method: string, path: string, body?: unknown) {
  const res = await stack.request(method, path, { headers: as(key), body });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

describe("session REST API", () => {
  it("creates, reads, lists and deletes sessions", async () => {
    const created = await call("tk-alice", "POST", "/v1/sessions", { metadata: { title: "groceries" } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ userId: "alice", metadata: { title: "groceries" } });
    const id = created.body.id;
    expect((await call("tk-alice", "GET", `/v1/sessions/${id}`)).body.id).toBe(id);
    const again = await call("tk-alice", "POST", "/v1/sessions", { id });
    expect(again.status).toBe(200);
    expect((await call("tk-alice", "GET", "/v1/sessions")).body.data.map((s: { id: string }) => s.id)).toContain(id);
    expect(await call("tk-alice", "DELETE", `/v1/sessions/${id}`)).toMatchObject({
      status: 200,
      body: { id, deleted: true },
    });
    expect((await call("tk-alice", "GET", `/v1/sessions/${id}`)).status).toBe(404);
  });

  it("pages sessions by cursor, newest activity first", async () => {
    const key = "tk-bob";
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const id = randomUUID();
      ids.push(id);
      await call(key, "POST", `/v1/sessions/${id}/messages`, {
        messages: [{ role: "user", content: `s${i}` }],
      });
      await new Promise((r) => setTimeout(r, 3));
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { body: { data: { id: string }[]; nextCursor: string | null } } = await call(
        key,
        "GET",
        `/v1/sessions?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      );
      seen.push(...page.body.data.map((s) => s.id));
      cursor = page.body.nextCursor;
    } while (cursor);
    expect(seen.filter((id) => ids.includes(id))).toEqual([...ids].reverse());
  });

  it("appends and pages messages oldest first", async () => {
    const id = randomUUID();
    const messages = Array.from({ length: 7 }, (_, i) => ({
      role: i % 2 ? "assistant" : "user",
      content: `m${i + 1}`,
    }));
    const added = await call("tk-alice", "POST", `/v1/sessions/${id}/messages`, { messages });
    expect(added.status).toBe(201);
    expect(added.body.data.map((m: { seq: number }) => m.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const first = await call("tk-alice", "GET", `/v1/sessions/${id}/messages?limit=3`);
    expect(first.body).toMatchObject({ hasMore: true, nextAfter: 3 });
    expect(first.body.data.map((m: { content: string }) => m.content)).toEqual(["m1", "m2", "m3"]);
    const rest = await call("tk-alice", "GET", `/v1/sessions/${id}/messages?after=3&limit=100`);
    expect(rest.body).toMatchObject({ hasMore: false, nextAfter: null });
    expect(rest.body.data.map((m: { seq: number }) => m.seq)).toEqual([4, 5, 6, 7]);
    expect((await call("tk-alice", "GET", `/v1/sessions/${id}/messages?limit=1001`)).status).toBe(400);
    const invalid = await call("tk-alice", "POST", `/v1/sessions/${id}/messages`, {
      messages: [{ role: "user" }],
    });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error).toMatchObject({ code: "invalid_message", param: "messages[0].content" });
  });

  it("searches a session", async () => {
    const id = randomUUID();
    await call("tk-alice", "POST", `/v1/sessions/${id}/messages`, {
      messages: [
        { role: "user", content: "Buy groceries on Friday" },
        { role: "assistant", content: "Noted." },
      ],
    });
    const hits = await call("tk-alice", "GET", `/v1/sessions/${id}/search?q=groceries`);
    expect(hits.status).toBe(200);
    expect(hits.body.data).toHaveLength(1);
    expect(hits.body.data[0]).toMatchObject({ sessionId: id, seq: 1 });
    expect((await call("tk-alice", "GET", `/v1/sessions/${id}/search`)).body.error).toMatchObject({
      code: "invalid_request",
      param: "q",
    });
  });

  it("shows the context the next turn would send, and what was left out", async () => {
    const id = randomUUID();
    const messages = Array.from({ length: 30 }, (_, i) => ({
      role: i % 2 ? "assistant" : "user",
      content: `m${i + 1}`,
    }));
    await call("tk-alice", "POST", `/v1/sessions/${id}/messages`, { messages });
    const context = await call("tk-alice", "GET", `/v1/sessions/${id}/context`);
    expect(context.status).toBe(200);
    expect(context.body.messages.length).toBeLessThanOrEqual(20);
    expect(context.body.messages.at(-1)).toEqual({ role: "assistant", content: "m30" });
    expect(context.body.includedSeqs).toEqual(Array.from({ length: 20 }, (_, i) => i + 11));
    expect(context.body.omitted).toMatchObject({ messages: expect.any(Number), tokens: expect.any(Number) });
    expect((await call("tk-alice", "GET", `/v1/sessions/${randomUUID()}/context`)).status).toBe(404);
  });

  it("reads and patches state with compare-and-set, and stores preferences", async () => {
    const id = (await call("tk-alice", "POST", "/v1/sessions")).body.id;
    expect((await call("tk-alice", "GET", `/v1/sessions/${id}/state`)).body).toEqual({
      version: 0,
      data: {},
    });
    const first = await call("tk-alice", "PATCH", `/v1/sessions/${id}/state`, {
      data: { task: 42, mood: "ok" },
    });
    expect(first.body).toEqual({ version: 1, data: { task: 42, mood: "ok" } });
    const second = await call("tk-alice", "PATCH", `/v1/sessions/${id}/state`, {
      data: { mood: null },
      expectedVersion: 1,
    });
    expect(second.body).toEqual({ version: 2, data: { task: 42 } });
    const stale = await call("tk-alice", "PATCH", `/v1/sessions/${id}/state`, {
      data: { x: 1 },
      expectedVersion: 1,
    });
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe("state_conflict");
    const badShape = await call("tk-alice", "PATCH", `/v1/sessions/${id}/state`, {
      data: { preferences: { maxRecentMessages: -3 }, conversation: { references: "not a list" } },
    });
    expect(badShape.status).toBe(400);
    expect(badShape.body.error.code).toBe("invalid_request");
    expect((await call("tk-alice", "GET", `/v1/sessions/${id}/state`)).body.version).toBe(2);
    const prefs = await call("tk-alice", "PUT", `/v1/sessions/${id}/preferences`, {
      maxRecentMessages: 4,
      sticky: true,
    });
    expect(prefs.status).toBe(200);
    expect(prefs.body.preferences).toEqual({ maxRecentMessages: 4, sticky: true });
    const bad = await call("tk-alice", "PUT", `/v1/sessions/${id}/preferences`, {
      maxRecentMessages: "many",
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: "invalid_request", param: "preferences.maxRecentMessages" });
    expect((await call("tk-alice", "PUT", `/v1/sessions/${randomUUID()}/preferences`, { sticky: true })).status).toBe(
      404,
    );
  });

  it("applies preferences to the next turn only, and a context preview does not use them up", async () => {
    const id = randomUUID();
    const messages = Array.from({ length: 12 }, (_, i) => ({
      role: i % 2 ? "assistant" : "user",
      content: `m${i + 1}`,
    }));
    await call("tk-alice", "POST", `/v1/sessions/${id}/messages`, { messages });
    await call("tk-alice", "PUT", `/v1/sessions/${id}/preferences`, { maxRecentMessages: 2 });
    const preview = await call("tk-alice", "GET", `/v1/sessions/${id}/context`);
    expect(preview.body.includedSeqs).toEqual([11, 12]);
    expect((await call("tk-alice", "GET", `/v1/sessions/${id}/context`)).body.includedSeqs).toEqual([11, 12]);
    const before = stack.fake.chatRequests().length;
    await stack
      .client("tk-alice")
      .chat.completions.create(
        { model: "m", messages: [{ role: "user", content: "next" }] },
        { headers: { "X-Session-ID": id } },
      );
    await stack
      .client("tk-alice")
      .chat.completions.create(
        { model: "m", messages: [{ role: "user", content: "after" }] },
        { headers: { "X-Session-ID": id } },
      );
    const [first, second] = stack.fake
      .chatRequests()
      .slice(before)
      .map((r) => r.body.messages.filter((m: { role: string }) => m.role !== "system"));
    expect(first.map((m: { content: string }) => m.content)).toEqual(["m11", "m12", "next"]);
    expect(second.length).toBeGreaterThan(3);
  });

  it("answers 400 invalid_session_id for a malformed id on every route", async () => {
    for (const [method, path] of [
      ["GET", "/v1/sessions/nope"],
      ["DELETE", "/v1/sessions/nope"],
      ["GET", "/v1/sessions/nope/messages"],
      ["GET", "/v1/sessions/nope/state"],
    ]) {
      const res = await call("tk-alice", method, path);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("invalid_session_id");
    }
  });
});

describe("two users", () => {
  it("never see each other's sessions through any endpoint", async () => {
    const alice = "tk-alice";
    const bob = "tk-bob";
    const { response } = await stack
      .client(alice)
      .chat.completions.create({ model: "m", messages: [{ role: "user", content: "alice's secret plan" }] })
      .withResponse();
    const id = response.headers.get("x-session-id") as string;
    await call(alice, "PATCH", `/v1/sessions/${id}/state`, { data: { secret: true } });
    const upstreamCalls = stack.fake.chatRequests().length;

    const attempts: [string, string, unknown?][] = [
      ["GET", `/v1/sessions/${id}`],
      ["DELETE", `/v1/sessions/${id}`],
      ["GET", `/v1/sessions/${id}/messages`],
      ["POST", `/v1/sessions/${id}/messages`, { messages: [{ role: "user", content: "bob was here" }] }],
      ["GET", `/v1/sessions/${id}/search?q=secret`],
      ["GET", `/v1/sessions/${id}/context`],
      ["GET", `/v1/sessions/${id}/state`],
      ["PATCH", `/v1/sessions/${id}/state`, { data: { bob: 1 } }],
      ["PUT", `/v1/sessions/${id}/preferences`, { sticky: true }],
      ["POST", "/v1/sessions", { id }],
    ];
    for (const [method, path, body] of attempts) {
      const res = await call(bob, method, path, body);
      expect([method, path, res.status]).toEqual([method, path, 404]);
      expect(res.body.error.code).toBe("session_not_found");
      expect(JSON.stringify(res.body)).not.toContain("secret plan");
    }
    for (const stream of [false, true]) {
      const res = await stack.request("POST", "/v1/chat/completions", {
        headers: { ...as(bob), "x-session-id": id },
        body: { model: "m", stream, messages: [{ role: "user", content: "bob asks" }] },
      });
      expect(res.status).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("session_not_found");
    }
    expect(stack.fake.chatRequests().length).toBe(upstreamCalls);
    const bobsList = await call(bob, "GET", "/v1/sessions?limit=1000");
    expect(bobsList.body.data.map((s: { id: string }) => s.id)).not.toContain(id);
    const bobsSearch = await stack.memory.search("secret", { userId: "bob" });
    expect(bobsSearch).toHaveLength(0);

    // Alice's session is exactly as she left it.
    const messages = await call(alice, "GET", `/v1/sessions/${id}/messages`);
    expect(messages.body.data.map((m: { content: string }) => m.content)).toEqual([
      "alice's secret plan",
      "echo: alice's secret plan",
    ]);
    expect((await call(alice, "GET", `/v1/sessions/${id}/state`)).body).toEqual({
      version: 1,
      data: { secret: true },
    });
  });
});
