/**
 * /v1/memories and /v1/users/me: the caller's memories written and corrected by hand, another user's
 * (another key's, or another end user's behind one key) always 404, bad input 400 `invalid_request`,
 * a memory whose source session is gone saying so, an operator key opening its tenant's end users
 * (and no other key), and erasing the caller's data leaving nobody else's touched.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemory } from "../../src/create-memory.js";
import { createServer } from "../../src/server/index.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { MAX_MEMORY_TEXT_LENGTH } from "../../src/core/user-memories/api.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { type Stack, startStack } from "./_stack.js";

const USER_HEADER = "X-OpenWebUI-User-Id";
let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    apiKeys: { "tk-alice": "alice", "tk-bob": "bob", "tk-gw": "acme", "tk-ops": "acme" },
    operatorKeys: ["tk-ops"],
    userHeader: USER_HEADER,
    store: createSqliteStore({ path: ":memory:" }),
  });
});
afterAll(async () => {
  await stack.close();
});

async function call(key: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await stack.request(method, path, { headers: { authorization: `Bearer ${key}`, ...headers }, body });
  return { status: res.status, body: (await res.json()) as any };
}

describe("/v1/memories", () => {
  it("adds, lists, gets, edits (keeping the history) and deletes the caller's memories", async () => {
    const added = await call("tk-alice", "POST", "/v1/memories", {
      text: "  is vegetarian ",
      metadata: { topic: "food" },
    });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({
      text: "is vegetarian",
      userId: "alice",
      source: { kind: "hand" },
      metadata: { topic: "food" },
      history: [],
    });
    const id = added.body.id as string;
    await call("tk-alice", "POST", "/v1/memories", { text: "manager is Sam" });

    const list = await call("tk-alice", "GET", "/v1/memories?limit=1");
    expect(list.status).toBe(200);
    expect(list.body.data.map((m: { text: string }) => m.text)).toEqual(["manager is Sam"]);
    expect(list.body.has_more).toBe(true);
    const next = await call("tk-alice", "GET", `/v1/memories?limit=1&cursor=${list.body.next_cursor}`);
    expect(next.body.data.map((m: { id: string }) => m.id)).toEqual([id]);
    expect(next.body.next_cursor).toBeNull();

    const edited = await call("tk-alice", "PATCH", `/v1/memories/${id}`, { text: "is vegan" });
    expect(edited.status).toBe(200);
    expect(edited.body.text).toBe("is vegan");
    expect(edited.body.history).toEqual([expect.objectContaining({ text: "is vegetarian", reason: "edit" })]);
    expect((await call("tk-alice", "GET", `/v1/memories/${id}`)).body).toEqual(edited.body);

    expect((await call("tk-alice", "DELETE", `/v1/memories/${id}`)).body).toMatchObject({ id, deleted: true });
    const gone = await call("tk-alice", "GET", `/v1/memories/${id}`);
    expect(gone.status).toBe(404);
    expect(gone.body.error.code).toBe("not_found");
    expect((await call("tk-alice", "DELETE", `/v1/memories/${id}`)).status).toBe(404);
  });

  it("ranks by relevance with q, and lists only memories sharing a word with it", async () => {
    for (const text of [
      "lives in Utrecht",
      "works at a bakery in Utrecht near the station",
      "has two cats",
      "likes Utrecht's canals and cats",
    ]) {
      await call("tk-bob", "POST", "/v1/memories", { text });
    }
    const found = await call("tk-bob", "GET", "/v1/memories?q=cats");
    expect(found.body.data.map((m: { text: string }) => m.text)).toEqual([
      "has two cats",
      "likes Utrecht's canals and cats",
    ]);
    const paged = await call("tk-bob", "GET", "/v1/memories?q=utrecht&limit=2");
    expect(paged.body.data[0].text).toBe("lives in Utrecht");
    expect(paged.body.data).toHaveLength(2);
    const rest = await call("tk-bob", "GET", `/v1/memories?q=utrecht&limit=2&cursor=${paged.body.next_cursor}`);
    expect(rest.body.data).toHaveLength(1);
    expect(rest.body.next_cursor).toBeNull();
    expect((await call("tk-bob", "GET", "/v1/memories?q=dogs")).body.data).toEqual([]);
  });

  it("never shows, edits or deletes another user's memory: 404 not_found", async () => {
    const mine = (await call("tk-alice", "POST", "/v1/memories", { text: "alice's secret" })).body.id;
    for (const [method, body] of [["GET"], ["PATCH", { text: "taken over" }], ["DELETE"]] as const) {
      const res = await call("tk-bob", method, `/v1/memories/${mine}`, body);
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe("not_found");
    }
    expect((await call("tk-bob", "GET", "/v1/memories?q=secret")).body.data).toEqual([]);
    expect((await call("tk-alice", "GET", `/v1/memories/${mine}`)).body.text).toBe("alice's secret");
  });

  it("keeps end users behind one key apart, as their sessions", async () => {
    const ann = { [USER_HEADER]: "ann" };
    const ben = { [USER_HEADER]: "ben" };
    const anns = await call("tk-gw", "POST", "/v1/memories", { text: "ann likes tea" }, ann);
    expect(anns.body.userId).toBe("acme/ann");
    expect((await call("tk-gw", "GET", "/v1/memories", undefined, ben)).body.data).toEqual([]);
    expect((await call("tk-gw", "GET", `/v1/memories/${anns.body.id}`, undefined, ben)).status).toBe(404);
    expect((await call("tk-gw", "GET", "/v1/memories")).body.data).toEqual([]);
    expect(
      (await call("tk-gw", "GET", "/v1/memories", undefined, ann)).body.data.map((m: { text: string }) => m.text),
    ).toEqual(["ann likes tea"]);
  });

  it("answers bad input with 400 invalid_request", async () => {
    const bad: [string, string, unknown][] = [
      ["POST", "/v1/memories", {}],
      ["POST", "/v1/memories", { text: "" }],
      ["POST", "/v1/memories", { text: "   " }],
      ["POST", "/v1/memories", { text: 42 }],
      ["POST", "/v1/memories", { text: "x".repeat(MAX_MEMORY_TEXT_LENGTH + 1) }],
      ["POST", "/v1/memories", { text: "ok", metadata: [1] }],
      ["POST", "/v1/memories", { text: "ok", userId: "bob" }],
      ["POST", "/v1/memories", { text: "ok", metadata: { big: "x".repeat(20_000) } }],
      ["GET", "/v1/memories?limit=0", undefined],
      ["GET", "/v1/memories?limit=many", undefined],
      ["GET", "/v1/memories?cursor=bogus", undefined],
      ["GET", "/v1/memories?q=x&cursor=bogus", undefined],
    ];
    for (const [method, path, body] of bad) {
      const res = await call("tk-alice", method, path, body);
      expect(res.status, `${method} ${path} ${JSON.stringify(body)?.slice(0, 50)}`).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    const id = (await call("tk-alice", "POST", "/v1/memories", { text: "to edit" })).body.id;
    for (const body of [{}, { text: "" }, { text: 1 }, { id: "x" }]) {
      const res = await call("tk-alice", "PATCH", `/v1/memories/${id}`, body);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    expect((await call("tk-alice", "GET", `/v1/memories/${"x".repeat(100)}`)).status).toBe(404);
  });
});

describe("a memory's source", () => {
  it("links to the session while it exists, and says so once it is gone: the memory keeps its text", async () => {
    const session = randomUUID();
    const added = await stack.request("POST", `/v1/sessions/${session}/messages`, {
      headers: { authorization: "Bearer tk-alice" },
      body: {
        messages: [
          { role: "user", content: "I moved to Utrecht" },
          { role: "assistant", content: "Noted." },
        ],
      },
    });
    expect(added.status).toBe(201);
    const memory = await stack.memory.memories.add(
      { text: "lives in Utrecht", source: { kind: "session", sessionId: session, seqs: [1, 2] } },
      { userId: "alice" },
    );
    expect(memory.source).toEqual({ kind: "session", sessionId: session, seqs: [1, 2], sessionDeleted: false });
    expect((await call("tk-alice", "GET", `/v1/memories/${memory.id}`)).body.source).toEqual({
      kind: "session",
      sessionId: session,
      seqs: [1, 2],
      sessionDeleted: false,
    });

    expect((await call("tk-alice", "DELETE", `/v1/sessions/${session}`)).status).toBe(200);
    const after = await call("tk-alice", "GET", `/v1/memories/${memory.id}`);
    expect(after.body).toMatchObject({
      text: "lives in Utrecht",
      source: { kind: "session", sessionId: session, seqs: [1, 2], sessionDeleted: true },
    });
    const listed = (await call("tk-alice", "GET", "/v1/memories?limit=100")).body.data.find(
      (m: { id: string }) => m.id === memory.id,
    );
    expect(listed.source.sessionDeleted).toBe(true);
    expect(
      (await call("tk-alice", "GET", "/v1/memories?q=utrecht")).body.data.find(
        (m: { id: string }) => m.id === memory.id,
      ).source.sessionDeleted,
    ).toBe(true);
    const edited = await call("tk-alice", "PATCH", `/v1/memories/${memory.id}`, {
      text: "lives in Utrecht, near the canal",
    });
    expect(edited.body.source.sessionDeleted).toBe(true);
  });

  it("counts another user's session of the same id as gone, and leaves a memory added by hand as it is", async () => {
    const bobs = randomUUID();
    await stack.request("POST", `/v1/sessions/${bobs}/messages`, {
      headers: { authorization: "Bearer tk-bob" },
      body: { messages: [{ role: "user", content: "bob's" }] },
    });
    const pointed = await stack.memory.memories.add(
      { text: "points at bob's session", source: { kind: "session", sessionId: bobs, seqs: [1] } },
      { userId: "alice" },
    );
    expect(pointed.source).toMatchObject({ sessionDeleted: true });
    const hand = (await call("tk-alice", "POST", "/v1/memories", { text: "by hand" })).body;
    expect(hand.source).toEqual({ kind: "hand" });
  });
});

describe("operator keys (X-Threadkeep-User)", () => {
  const ops = (user: string): Record<string, string> => ({ "X-Threadkeep-User": user });

  it("says who the caller is, and whether it may open other users", async () => {
    expect((await call("tk-alice", "GET", "/v1/users/me")).body).toEqual({
      object: "user",
      id: "alice",
      tenant: "alice",
      operator: false,
      canOpenUsers: false,
    });
    expect((await call("tk-gw", "GET", "/v1/users/me", undefined, { [USER_HEADER]: "ann" })).body).toMatchObject({
      id: "acme/ann",
      tenant: "acme",
      operator: false,
    });
    expect((await call("tk-ops", "GET", "/v1/users/me")).body).toEqual({
      object: "user",
      id: "acme",
      tenant: "acme",
      operator: true,
      canOpenUsers: true,
    });
    expect((await call("tk-ops", "GET", "/v1/users/me", undefined, ops("ann"))).body).toMatchObject({
      id: "acme/ann",
      operator: true,
    });
  });

  it("lets an operator key read, edit and delete its tenant's end users' memories, and their sessions", async () => {
    const eve = { [USER_HEADER]: `eve-${randomUUID()}` };
    const name = eve[USER_HEADER];
    const fact = (await call("tk-gw", "POST", "/v1/memories", { text: "eve drinks oat milk" }, eve)).body;
    const session = randomUUID();
    await stack.request("POST", `/v1/sessions/${session}/messages`, {
      headers: { authorization: "Bearer tk-gw", ...eve },
      body: { messages: [{ role: "user", content: "eve's question" }] },
    });

    const seen = await call("tk-ops", "GET", "/v1/memories", undefined, ops(name));
    expect(seen.status).toBe(200);
    expect(seen.body.data.map((m: { id: string }) => m.id)).toEqual([fact.id]);
    expect(
      (await call("tk-ops", "GET", "/v1/sessions", undefined, ops(name))).body.data.map((s: { id: string }) => s.id),
    ).toEqual([session]);
    const edited = await call("tk-ops", "PATCH", `/v1/memories/${fact.id}`, { text: "eve drinks soy milk" }, ops(name));
    expect(edited.body).toMatchObject({
      text: "eve drinks soy milk",
      userId: `acme/${name}`,
      history: [expect.objectContaining({ text: "eve drinks oat milk" })],
    });
    // Without the header the operator key is its own user, who has none of eve's.
    expect((await call("tk-ops", "GET", `/v1/memories/${fact.id}`)).status).toBe(404);
    expect((await call("tk-ops", "DELETE", `/v1/memories/${fact.id}`, undefined, ops(name))).body).toMatchObject({
      deleted: true,
    });
    expect((await call("tk-gw", "GET", "/v1/memories", undefined, eve)).body.data).toEqual([]);
  });

  it("opens only end users of its own tenant: another key's user is out of reach", async () => {
    const alices = (await call("tk-alice", "POST", "/v1/memories", { text: "alice's own, not acme's" })).body;
    for (const user of ["alice", "../alice", "alice/"]) {
      const res = await call("tk-ops", "GET", `/v1/memories/${alices.id}`, undefined, ops(user));
      expect(res.status, user).toBe(404);
      expect((await call("tk-ops", "GET", "/v1/memories?q=alice", undefined, ops(user))).body.data).toEqual([]);
    }
  });

  it("refuses the header from every other key with 403 operator_only, and bad values with 400", async () => {
    for (const [key, extra] of [
      ["tk-alice", {}],
      ["tk-gw", {}],
      ["tk-gw", { [USER_HEADER]: "ann" }],
    ] as const) {
      for (const [method, path] of [
        ["GET", "/v1/memories"],
        ["GET", "/v1/users/me"],
        ["GET", "/v1/sessions"],
        ["DELETE", "/v1/users/me"],
      ] as const) {
        const res = await call(key, method, path, undefined, { ...extra, ...ops("ann") });
        expect(res.status, `${key} ${method} ${path}`).toBe(403);
        expect(res.body.error).toMatchObject({ code: "operator_only", type: "permission_error" });
      }
    }
    expect(
      (await call("tk-gw", "GET", "/v1/memories", undefined, { [USER_HEADER]: "ann" })).body.data.map(
        (m: { text: string }) => m.text,
      ),
    ).toEqual(["ann likes tea"]);
    const both = await call("tk-ops", "GET", "/v1/memories", undefined, { ...ops("ann"), [USER_HEADER]: "ben" });
    expect(both.status).toBe(400);
    expect(both.body.error.code).toBe("invalid_request");
    for (const value of ["", "x".repeat(257)]) {
      const res = await call("tk-ops", "GET", "/v1/memories", undefined, ops(value));
      expect(res.status, JSON.stringify(value)).toBe(400);
      expect(res.body.error.code).toBe("invalid_user");
    }
  });

  it("needs end users on the server, and every operator key among the API keys", async () => {
    const memory = createMemory({ store: createMemoryStore() });
    const server = await createServer({
      memory,
      apiKeys: { "tk-ops": "acme" },
      operatorKeys: ["tk-ops"],
      port: 0,
      fairShare: false,
    });
    const url = await server.listen();
    try {
      const res = await fetch(`${url}/v1/memories`, {
        headers: { authorization: "Bearer tk-ops", "X-Threadkeep-User": "ann" },
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as any).error.message).toMatch(/--user-header/);
      expect(
        await (await fetch(`${url}/v1/users/me`, { headers: { authorization: "Bearer tk-ops" } })).json(),
      ).toMatchObject({ operator: true, canOpenUsers: false });
    } finally {
      await server.close();
    }
    await expect(
      createServer({ memory, apiKeys: { "tk-a": "acme" }, operatorKeys: ["tk-typo"], port: 0 }),
    ).rejects.toMatchObject({ code: "invalid_request" });
    await memory.close();
  });
});

describe("DELETE /v1/users/me", () => {
  it("erases the caller's sessions and memories, and nobody else's", async () => {
    const key = "tk-gw";
    const cat = { [USER_HEADER]: `cat-${crypto.randomUUID()}` };
    const dan = { [USER_HEADER]: `dan-${crypto.randomUUID()}` };
    for (const who of [cat, dan]) {
      const session = crypto.randomUUID();
      const res = await stack.request("POST", `/v1/sessions/${session}/messages`, {
        headers: { authorization: `Bearer ${key}`, ...who },
        body: { messages: [{ role: "user", content: "hello from the erase test" }] },
      });
      expect(res.status).toBe(201);
      await call(key, "POST", "/v1/memories", { text: "a fact" }, who);
    }
    const erased = await call(key, "DELETE", "/v1/users/me", undefined, cat);
    expect(erased.status).toBe(200);
    expect(erased.body).toMatchObject({ deleted: true, sessions: 1, memories: 1 });
    expect((await call(key, "GET", "/v1/sessions", undefined, cat)).body.data).toEqual([]);
    expect((await call(key, "GET", "/v1/memories", undefined, cat)).body.data).toEqual([]);
    expect((await call(key, "GET", "/v1/search?q=erase", undefined, cat)).body.data).toEqual([]);
    expect((await call(key, "GET", "/v1/sessions", undefined, dan)).body.data).toHaveLength(1);
    expect((await call(key, "GET", "/v1/memories", undefined, dan)).body.data).toHaveLength(1);
  });
});
