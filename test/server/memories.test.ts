/**
 * /v1/memories and DELETE /v1/users/me: the caller's memories written and corrected by hand, another
 * user's (another key's, or another end user's behind one key) always 404, bad input 400
 * `invalid_request`, and erasing the caller's data leaving nobody else's touched.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_MEMORY_TEXT_LENGTH } from "../../src/core/memory/user-memories.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { type Stack, startStack } from "./_stack.js";

const USER_HEADER = "X-OpenWebUI-User-Id";
let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    apiKeys: { "tk-alice": "alice", "tk-bob": "bob", "tk-gw": "acme" },
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
    const added = await call("tk-alice", "POST", "/v1/memories", { text: "  is vegetarian ", metadata: { topic: "food" } });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ text: "is vegetarian", userId: "alice", source: { kind: "hand" }, metadata: { topic: "food" }, history: [] });
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
    for (const text of ["lives in Utrecht", "works at a bakery in Utrecht near the station", "has two cats", "likes Utrecht's canals and cats"]) {
      await call("tk-bob", "POST", "/v1/memories", { text });
    }
    const found = await call("tk-bob", "GET", "/v1/memories?q=cats");
    expect(found.body.data.map((m: { text: string }) => m.text)).toEqual(["has two cats", "likes Utrecht's canals and cats"]);
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
    expect((await call("tk-gw", "GET", "/v1/memories", undefined, ann)).body.data.map((m: { text: string }) => m.text)).toEqual(["ann likes tea"]);
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
