import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { type Stack, startStack } from "./_stack.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    apiKeys: { "tk-alice": "alice", "tk-bob": "bob" },
    store: createSqliteStore({ path: ":memory:" }),
  });
});
afterAll(async () => {
  await stack.close();
});

async function call(key: string, path: string) {
  const res = await stack.request("GET", path, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as any };
}

async function append(key: string, id: string, content: string) {
  const res = await stack.request("POST", `/v1/sessions/${id}/messages`, {
    headers: { authorization: `Bearer ${key}` },
    body: { messages: [{ role: "user", content }] },
  });
  expect(res.status).toBe(201);
}

describe("GET /v1/search", () => {
  it("searches every session of the caller, with stemming, and none of another owner's", async () => {
    const [a, b, c] = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()];
    await append("tk-alice", a, "Remember to buy groceries on Friday");
    await append("tk-alice", b, "The grocery store closes at eight");
    await append("tk-bob", c, "bob's grocery list is private");
    const found = await call("tk-alice", "/v1/search?q=grocery&mode=fulltext");
    expect(found.status).toBe(200);
    expect(found.body.data.map((h: { sessionId: string }) => h.sessionId).sort()).toEqual([a, b].sort());
    const auto = await call("tk-alice", "/v1/search?q=grocery");
    expect(auto.body.data).toHaveLength(2);
    const one = await call("tk-alice", `/v1/search?q=grocery&session=${b}`);
    expect(one.body.data.map((h: { sessionId: string }) => h.sessionId)).toEqual([b]);
    const bobs = await call("tk-bob", "/v1/search?q=grocery&mode=fulltext");
    expect(bobs.body.data.map((h: { sessionId: string }) => h.sessionId)).toEqual([c]);
    // Another owner's session named explicitly is not found, as everywhere else.
    expect((await call("tk-bob", `/v1/search?q=grocery&session=${a}`)).status).toBe(404);
  });

  it("answers bad queries and modes it cannot serve with OpenAI-style 4xx/501 errors", async () => {
    const missing = await call("tk-alice", "/v1/search");
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatchObject({ code: "invalid_request" });
    const badMode = await call("tk-alice", "/v1/search?q=x&mode=psychic");
    expect(badMode.status).toBe(400);
    expect(badMode.body.error.message).toMatch(/^mode:/);
    // No embeddings configured: semantic search is refused, not faked.
    const semantic = await call("tk-alice", "/v1/search?q=x&mode=semantic");
    expect(semantic.status).toBe(501);
    expect(semantic.body.error.code).toBe("not_supported");
  });
});
