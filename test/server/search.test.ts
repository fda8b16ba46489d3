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

  it("ranks a question by relevance by default, with the reply after each hit; recency and hybrid without an embedder", async () => {
    const id = crypto.randomUUID();
    const res = await stack.request("POST", `/v1/sessions/${id}/messages`, {
      headers: { authorization: "Bearer tk-alice" },
      body: {
        messages: [
          { role: "user", content: "Which pottery class should I take?" },
          { role: "assistant", content: "The Tuesday wheel-throwing one." },
          { role: "user", content: "unrelated note about the weather" },
        ],
      },
    });
    expect(res.status).toBe(201);
    const q = encodeURIComponent("What did I say about the pottery classes?");
    const auto = await call("tk-alice", `/v1/search?q=${q}&session=${id}`);
    // Seq 1 holds "pottery" and "class"; seq 3 only "about".
    expect(auto.body.data.map((h: { seq: number }) => h.seq)).toEqual([1, 3]);
    expect(auto.body.data[0].neighbours).toEqual([
      { seq: 2, role: "assistant", content: "The Tuesday wheel-throwing one." },
    ]);
    expect(
      (await call("tk-alice", `/v1/search?q=${q}&session=${id}&neighbours=0`)).body.data[0].neighbours,
    ).toBeUndefined();
    // Every word, newest first, stays there: the question's words are not all in any message.
    expect((await call("tk-alice", `/v1/search?q=${q}&session=${id}&ranking=recency`)).body.data).toEqual([]);
    const hybrid = await call("tk-alice", `/v1/search?q=${q}&session=${id}&mode=hybrid`);
    expect(hybrid.status).toBe(200);
    expect(hybrid.body.data.map((h: { seq: number }) => h.seq)).toEqual([1, 3]);
    const badRanking = await call("tk-alice", `/v1/search?q=x&mode=hybrid&ranking=recency`);
    expect(badRanking.status).toBe(400);
    expect(badRanking.body.error.code).toBe("invalid_request");
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
