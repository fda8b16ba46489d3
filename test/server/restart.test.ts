import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { type Stack, startStack, transcript } from "./_stack.js";

const dir = mkdtempSync(join(tmpdir(), "threadkeep-restart-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a server restart on SQLite", () => {
  it("keeps every conversation", async () => {
    // A nested path: the data directory is created on first use.
    const store = `sqlite:${join(dir, "data", "threadkeep.db")}`;
    let stack: Stack = await startStack({ store, apiKeys: { "tk-a": "alice", "tk-b": "bob" } });
    const ids: Record<string, string> = {};
    for (const key of ["tk-a", "tk-b"]) {
      for (let i = 1; i <= 3; i++) {
        const { response } = await stack
          .client(key)
          .chat.completions.create(
            { model: "m", messages: [{ role: "user", content: `${key} turn ${i}` }] },
            { headers: ids[key] ? { "X-Session-ID": ids[key] } : {} },
          )
          .withResponse();
        ids[key] ??= response.headers.get("x-session-id") as string;
      }
    }
    await stack.close();

    stack = await startStack({ store, apiKeys: { "tk-a": "alice", "tk-b": "bob" } });
    try {
      await stack
        .client("tk-a")
        .chat.completions.create(
          { model: "m", messages: [{ role: "user", content: "after restart" }] },
          { headers: { "X-Session-ID": ids["tk-a"] } },
        );
      expect(transcript(stack.fake.chatRequests()[0].body)).toEqual([
        "user: tk-a turn 1",
        "assistant: echo: tk-a turn 1",
        "user: tk-a turn 2",
        "assistant: echo: tk-a turn 2",
        "user: tk-a turn 3",
        "assistant: echo: tk-a turn 3",
        "user: after restart",
      ]);
      const res = await stack.request("GET", `/v1/sessions/${ids["tk-b"]}/messages`, {
        headers: { authorization: "Bearer tk-b" },
      });
      expect(((await res.json()) as { data: unknown[] }).data).toHaveLength(6);
      const bobSees = await stack.request("GET", `/v1/sessions/${ids["tk-a"]}`, {
        headers: { authorization: "Bearer tk-b" },
      });
      expect(bobSees.status).toBe(404);
    } finally {
      await stack.close();
    }
  });
});
