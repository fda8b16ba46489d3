import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Stack, startStack } from "./_stack.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    apiKeys: { "tk-alice": "alice", "tk-bob": "bob" },
    // Summaries every 6 messages, so the summaries route has something to show.
    memoryOptions: {
      summarizer: { summarize: async (r) => `summary of ${r.messages.length} messages` },
      compaction: { threshold: 6, maxBatch: 100, background: false },
      window: 6,
    },
  });
});
afterAll(async () => {
  await stack.close();
});

async function call(key: string, method: string, path: string, body?: unknown) {
  const res = await stack.request(method, path, { headers: { authorization: `Bearer ${key}` }, body });
  const text = await res.text();
  const json = res.headers.get("content-type")?.startsWith("application/json");
  return { status: res.status, body: json && text ? JSON.parse(text) : text, headers: res.headers };
}

const turns = (n: number, prefix = "m") =>
  Array.from({ length: n }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `${prefix}${i + 1}` }));

async function seed(key: string, n: number, prefix?: string): Promise<string> {
  const id = randomUUID();
  expect((await call(key, "POST", `/v1/sessions/${id}/messages`, { messages: turns(n, prefix) })).status).toBe(201);
  return id;
}

describe("session list overview", () => {
  it("adds each session's title, message count and the store, for the caller's sessions only", async () => {
    const id = randomUUID();
    await call("tk-alice", "POST", `/v1/sessions/${id}/messages`, {
      messages: [
        { role: "system", content: "rules" },
        { role: "user", content: "  Plan   a trip\nto Utrecht  " },
        { role: "assistant", content: "Sure." },
      ],
    });
    const bobs = await seed("tk-bob", 2, "bob");
    const page = await call("tk-alice", "GET", "/v1/sessions?overview=true&limit=1000");
    expect(page.status).toBe(200);
    expect(page.body.store).toBe("memory");
    const row = page.body.data.find((s: { id: string }) => s.id === id);
    expect(row).toMatchObject({ id, userId: "alice", title: "Plan a trip to Utrecht", messageCount: 3 });
    expect(page.body.data.map((s: { id: string }) => s.id)).not.toContain(bobs);
    const plain = await call("tk-alice", "GET", "/v1/sessions?limit=1000");
    expect(plain.body.data[0].title).toBeUndefined();
    expect((await call("tk-alice", "GET", "/v1/sessions?overview=yes")).status).toBe(400);
  });
});

describe("context preview", () => {
  it("takes another window and budget, reports left-out seqs and part tokens, and stores nothing", async () => {
    const id = await seed("tk-alice", 5);
    await call("tk-alice", "PUT", `/v1/sessions/${id}/preferences`, { pinnedSeqs: [1] });
    const stateBefore = (await call("tk-alice", "GET", `/v1/sessions/${id}/state`)).body;
    const preview = await call("tk-alice", "GET", `/v1/sessions/${id}/context?window=2&tokenBudget=500`);
    expect(preview.status).toBe(200);
    expect(preview.body).toMatchObject({ window: 2, tokenBudget: 500, includedSeqs: [1, 4, 5] });
    // The pin reads its neighbours too; outside the window of 2, they are left out for it.
    expect(preview.body.omitted.seqs).toEqual({ window: [2, 3], budget: [], toolPairs: [] });
    const parts = preview.body.parts;
    expect(Object.values(parts as Record<string, number>).reduce((a, b) => a + b, 0)).toBe(preview.body.tokens);
    expect((await call("tk-alice", "GET", `/v1/sessions/${id}/state`)).body).toEqual(stateBefore);
    const defaults = await call("tk-alice", "GET", `/v1/sessions/${id}/context`);
    expect(defaults.body.window).toBe(6);
    const bad = await call("tk-alice", "GET", `/v1/sessions/${id}/context?tokenBudget=0`);
    expect(bad.body.error).toMatchObject({ code: "invalid_request", param: "tokenBudget" });
  });
});

describe("summaries, fork, undo and export", () => {
  it("lists a session's summaries", async () => {
    const id = await seed("tk-alice", 14);
    const summaries = await call("tk-alice", "GET", `/v1/sessions/${id}/summaries`);
    expect(summaries.status).toBe(200);
    expect(summaries.body.data.length).toBeGreaterThan(0);
    expect(summaries.body.data[0]).toMatchObject({
      fromSeq: 1,
      content: expect.stringMatching(/^summary of \d+ messages$/),
    });
    expect((await call("tk-bob", "GET", `/v1/sessions/${id}/summaries`)).status).toBe(404);
  });

  it("forks at a message into a new session of the same owner", async () => {
    const id = await seed("tk-alice", 4);
    const fork = await call("tk-alice", "POST", `/v1/sessions/${id}/fork`, { atSeq: 3 });
    expect(fork.status).toBe(201);
    expect(fork.headers.get("x-session-id")).toBe(fork.body.id);
    expect(fork.body).toMatchObject({ userId: "alice", metadata: { forkedFrom: { sessionId: id, atSeq: 3 } } });
    const copied = await call("tk-alice", "GET", `/v1/sessions/${fork.body.id}/messages`);
    expect(copied.body.data.map((m: { content: string }) => m.content)).toEqual(["m1", "m2", "m3"]);
    expect((await call("tk-bob", "POST", `/v1/sessions/${id}/fork`, {})).status).toBe(404);
    const bad = await call("tk-alice", "POST", `/v1/sessions/${id}/fork`, { atSeq: "three" });
    expect(bad.body.error).toMatchObject({ code: "invalid_request", param: "atSeq" });
  });

  it("undoes the last turn", async () => {
    const id = await seed("tk-alice", 4);
    expect((await call("tk-bob", "POST", `/v1/sessions/${id}/undo`)).status).toBe(404);
    const undo = await call("tk-alice", "POST", `/v1/sessions/${id}/undo`);
    expect(undo.status).toBe(200);
    expect(undo.body.data.map((m: { seq: number }) => m.seq)).toEqual([3, 4]);
    const left = await call("tk-alice", "GET", `/v1/sessions/${id}/messages`);
    expect(left.body.data.map((m: { content: string }) => m.content)).toEqual(["m1", "m2"]);
  });

  it("exports one session as threadkeep JSONL", async () => {
    const id = await seed("tk-alice", 2, "x");
    const res = await call("tk-alice", "GET", `/v1/sessions/${id}/export`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
    expect(res.headers.get("content-disposition")).toBe(`attachment; filename="threadkeep-${id}.jsonl"`);
    const lines = (res.body as string)
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.type)).toEqual(["threadkeep-export", "session", "message", "message"]);
    expect(lines[1].session).toMatchObject({ id, userId: "alice" });
    expect(lines[3].message).toMatchObject({ seq: 2, role: "assistant", content: "x2" });
    expect((await call("tk-bob", "GET", `/v1/sessions/${id}/export`)).status).toBe(404);
  });
});

describe("the /ui page", () => {
  it("serves the page and its assets without a key, with a strict Content-Security-Policy", async () => {
    for (const path of ["/ui", "/ui/", `/ui/s/${randomUUID()}/context`]) {
      const res = await stack.request("GET", path);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
      const csp = res.headers.get("content-security-policy") ?? "";
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain("unsafe-inline");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(await res.text()).toContain('src="/ui/assets/app.js"');
    }
    const js = await stack.request("GET", "/ui/assets/app.js");
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    const etag = js.headers.get("etag") ?? "";
    expect((await stack.request("GET", "/ui/assets/app.js", { headers: { "if-none-match": etag } })).status).toBe(304);
    for (const path of [
      "/ui/assets/nope.js",
      "/ui/assets/tsconfig.json",
      "/ui/assets/index.html",
      "/ui/assets/..%2Fapp.ts",
    ]) {
      expect((await stack.request("GET", path)).status).toBe(404);
    }
    // The page holds no data: the API behind it still wants a key.
    expect((await stack.request("GET", "/v1/sessions")).status).toBe(401);
  });
});
