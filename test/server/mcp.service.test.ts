/**
 * The MCP server through the official MCP client: over stdio (`threadkeep mcp` as a child process)
 * and over streamable HTTP (`/mcp` on the server, behind API keys). Every tool is listed and called,
 * the transcript resource is read, and another user's session (or memory) is refused; a memory pinned
 * with `set_context_preferences` reaches the model through the proxy.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Memory } from "../../src/core/memory/memory.js";
import { createMemory } from "../../src/create-memory.js";
import { MCP_TOOLS, TRANSCRIPT_TEMPLATE } from "../../src/server/mcp/tools.js";
import { cliArgs } from "../_dist.js";
import { startStack, type Stack } from "./_stack.js";

const dir = mkdtempSync(join(tmpdir(), "tk-mcp-"));
const storeUrl = `sqlite:${join(dir, "mcp.db")}`;
let memory: Memory;
let stack: Stack;
let alice: string;
let bob: string;
let bobMemory: string;

beforeAll(async () => {
  memory = createMemory({ store: storeUrl });
  alice = (await memory.startSession({ userId: "alice", metadata: { title: "Groceries" } })).id;
  await memory.addMessages(
    alice,
    [
      { role: "user", content: "Create a task: buy groceries" },
      { role: "assistant", content: "Created task 42: buy groceries." },
      { role: "user", content: "And one to call the plumber" },
      { role: "assistant", content: "Created task 43: call the plumber." },
    ],
    { userId: "alice" },
  );
  bob = (await memory.startSession({ userId: "bob" })).id;
  await memory.addMessages(bob, [{ role: "user", content: "bob's secret groceries" }], { userId: "bob" });
  bobMemory = (await memory.memories.add({ text: "Bob keeps his groceries list secret" }, { userId: "bob" })).id;
  stack = await startStack({ store: storeUrl, apiKeys: { "key-alice": "alice", "key-bob": "bob" } });
});
afterAll(async () => {
  await stack?.close();
  await memory?.close();
  rmSync(dir, { recursive: true, force: true });
});

type ToolResult = { isError?: boolean; content: { type: string; text?: string }[] };
const parsed = (result: unknown) => JSON.parse((result as ToolResult).content[0].text!);

const transports: [string, () => Transport][] = [
  [
    "stdio",
    () =>
      new StdioClientTransport({
        command: process.execPath,
        args: [...cliArgs(), "mcp", "--store", storeUrl, "--user", "alice"],
        env: { ...(process.env as Record<string, string>), THREADKEEP_STORE: "" },
        stderr: "pipe",
      }),
  ],
  [
    "streamable HTTP",
    () =>
      new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
        requestInit: { headers: { Authorization: "Bearer key-alice" } },
      }),
  ],
];

describe.each(transports)("threadkeep MCP over %s", (_name, transport) => {
  let client: Client;
  const call = (name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args });

  beforeAll(async () => {
    client = new Client({ name: "threadkeep-test", version: "1.0.0" });
    await client.connect(transport());
  });
  afterAll(async () => {
    await client?.close();
  });

  it("lists every tool with an input schema", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...MCP_TOOLS].sort());
    const prefs = tools.find((t) => t.name === "set_context_preferences")!;
    expect(Object.keys(prefs.inputSchema.properties ?? {})).toEqual(
      expect.arrayContaining([
        "session_id",
        "maxRecentMessages",
        "focusRange",
        "pinnedSeqs",
        "sticky",
        "memory_ids",
        "memories",
      ]),
    );
  });

  it("lists, reads and searches the user's own sessions only", async () => {
    const listed = parsed(await call("list_sessions", {}));
    expect(listed.sessions.map((s: { id: string }) => s.id)).toEqual([alice]);
    const messages = parsed(await call("read_messages", { session_id: alice, after: 2, limit: 1 }));
    expect(messages.map((m: { seq: number; content: string }) => [m.seq, m.content])).toEqual([
      [3, "And one to call the plumber"],
    ]);
    const hits = parsed(await call("search", { q: "groceries" }));
    expect(hits.map((h: { sessionId: string; seq: number }) => [h.sessionId, h.seq]).sort()).toEqual([
      [alice, 1],
      [alice, 2],
    ]);
  });

  it("recalls, shows the context and sets context preferences", async () => {
    const hit = parsed(await call("recall", { session_id: alice, text: "plumber", around: 0 }));
    expect(hit.seq).toBe(4);
    const prefs = parsed(await call("set_context_preferences", { session_id: alice, maxRecentMessages: 1 }));
    expect(prefs).toEqual({ focusRange: { fromSeq: 4, toSeq: 4 }, maxRecentMessages: 1 });
    const pinned = parsed(await call("set_context_preferences", { session_id: alice, memory_ids: ["m-1"] }));
    expect(pinned).toMatchObject({ maxRecentMessages: 1, memoryIds: ["m-1"] });
    const context = parsed(await call("show_context", { session_id: alice, input: "what is left?" }));
    expect(context.messages.at(-1)).toEqual({ role: "user", content: "what is left?" });
    expect(context.messages.map((m: { content: string }) => m.content)).toContain("Created task 43: call the plumber.");
  });

  it("reads and updates the conversational state", async () => {
    await call("add_reference", { session_id: alice, type: "task", id: 42, label: "buy groceries" });
    const pending = parsed(
      await call("set_pending_confirmation", {
        session_id: alice,
        action: "delete_task",
        args: { id: 42 },
        prompt: "Delete task 42?",
      }),
    );
    expect(pending).toMatchObject({ action: "delete_task", args: { id: 42 } });
    let state = parsed(await call("get_conversation_state", { session_id: alice }));
    expect(state.references[0]).toMatchObject({ type: "task", id: 42 });
    expect(state.pending.id).toBe(pending.id);
    state = parsed(await call("update_conversation_state", { session_id: alice, pending: null, references: [] }));
    expect(state).toEqual({ references: [] });
  });

  it("reads transcripts as resources", async () => {
    const { resources } = await client.listResources();
    const uri = TRANSCRIPT_TEMPLATE.replace("{sessionId}", alice);
    expect(resources.map((r) => r.uri)).toEqual([uri]);
    expect(resources[0].name).toBe("Groceries");
    const read = await client.readResource({ uri });
    expect((read.contents[0] as { text: string }).text).toBe(
      [
        "[1] user: Create a task: buy groceries",
        "[2] assistant: Created task 42: buy groceries.",
        "[3] user: And one to call the plumber",
        "[4] assistant: Created task 43: call the plumber.",
      ].join("\n"),
    );
  });

  it("refuses another user's session, as not found, and leaves it untouched", async () => {
    for (const [name, args] of [
      ["read_messages", { session_id: bob }],
      ["recall", { session_id: bob, text: "secret" }],
      ["show_context", { session_id: bob }],
      ["set_context_preferences", { session_id: bob, maxRecentMessages: 5 }],
      ["get_conversation_state", { session_id: bob }],
      ["add_reference", { session_id: bob, type: "task", id: 1 }],
    ] as const) {
      const result = (await call(name, args)) as ToolResult;
      expect(result.isError, name).toBe(true);
      expect(parsed(result).error.code, name).toBe("session_not_found");
    }
    expect(parsed(await call("search", { q: "secret" }))).toEqual([]);
    await expect(client.readResource({ uri: TRANSCRIPT_TEMPLATE.replace("{sessionId}", bob) })).rejects.toThrow(
      /No session/,
    );
    expect(await memory.getState(bob, { userId: "bob" })).toEqual({ version: 0, data: {} });
  });

  it("adds, lists, searches, reads, updates and deletes the user's memories", async () => {
    const added = parsed(await call("add_memory", { text: "  Is vegetarian  ", metadata: { via: "mcp" } }));
    expect(added).toMatchObject({
      userId: "alice",
      text: "Is vegetarian",
      source: { kind: "hand" },
      metadata: { via: "mcp" },
      history: [],
    });
    const other = parsed(await call("add_memory", { text: "Manager is Sam" }));
    try {
      const listed = parsed(await call("list_memories", {}));
      expect(listed.memories.map((m: { id: string }) => m.id)).toEqual([other.id, added.id]);
      const paged = parsed(await call("list_memories", { limit: 1 }));
      expect(paged.memories.map((m: { id: string }) => m.id)).toEqual([other.id]);
      expect(parsed(await call("list_memories", { limit: 1, cursor: paged.nextCursor })).memories[0].id).toBe(added.id);
      const searched = parsed(await call("list_memories", { q: "my manager" }));
      expect(searched.memories.map((m: { text: string }) => m.text)).toEqual(["Manager is Sam"]);
      expect(parsed(await call("get_memory", { id: added.id }))).toEqual(added);
      const updated = parsed(await call("update_memory", { id: added.id, text: "Is vegan" }));
      expect(updated).toMatchObject({
        id: added.id,
        text: "Is vegan",
        history: [{ text: "Is vegetarian", reason: "edit" }],
      });
      expect((await memory.memories.get(added.id, { userId: "alice" }))?.text).toBe("Is vegan");
      expect(parsed(await call("delete_memory", { id: added.id }))).toEqual({ id: added.id, deleted: true });
      expect(await memory.memories.get(added.id, { userId: "alice" })).toBeNull();
      const gone = (await call("get_memory", { id: added.id })) as ToolResult;
      expect(gone.isError).toBe(true);
      expect(parsed(gone).error.code).toBe("not_found");
    } finally {
      await memory.memories.delete(added.id, { userId: "alice" });
      await memory.memories.delete(other.id, { userId: "alice" });
    }
  });

  it("treats another user's memory as not found, and leaves it untouched", async () => {
    for (const [name, args] of [
      ["get_memory", { id: bobMemory }],
      ["update_memory", { id: bobMemory, text: "Bob has no secrets" }],
      ["delete_memory", { id: bobMemory }],
    ] as const) {
      const result = (await call(name, args)) as ToolResult;
      expect(result.isError, name).toBe(true);
      expect(parsed(result).error.code, name).toBe("not_found");
    }
    expect(parsed(await call("list_memories", { q: "groceries secret" })).memories).toEqual([]);
    expect(await memory.memories.get(bobMemory, { userId: "bob" })).toMatchObject({
      text: "Bob keeps his groceries list secret",
      history: [],
    });
  });

  it("answers bad memory input as a tool error", async () => {
    const empty = (await call("add_memory", { text: "   " })) as ToolResult;
    expect(empty.isError).toBe(true);
    expect(parsed(empty).error.code).toBe("invalid_request");
    const long = (await call("add_memory", { text: "x".repeat(2_001) })) as ToolResult;
    expect(long.isError).toBe(true);
    expect(long.content[0].text).toMatch(/text/);
    expect(parsed(await call("list_memories", {})).memories).toEqual([]);
  });

  it("answers bad input as a tool error naming the field", async () => {
    const result = (await call("set_context_preferences", { session_id: alice, maxRecentMessages: 0 })) as ToolResult;
    expect(result.isError).toBe(true);
    expect(result.content[0].text).toMatch(/maxRecentMessages/);
  });
});

describe("set_context_preferences memory_ids through the proxy", () => {
  it("brings a pinned memory into the model's context that the token share left out before", async () => {
    const pinStack = await startStack({ apiKeys: { "key-ann": "ann" }, memoryOptions: { tokenBudget: 2000 } });
    const client = new Client({ name: "threadkeep-test", version: "1.0.0" });
    try {
      const store = await pinStack.memory.store();
      // The oldest memory, and unrelated to the message: without the pin it is the first left out.
      const pinned = await store.addUserMemory({ userId: "ann", text: "Manager is Sam", createdAt: 1_000 });
      for (let i = 0; i < 30; i++) {
        await store.addUserMemory({
          userId: "ann",
          text: `Collects stamps from country number ${i} and keeps them in album ${i}`,
          createdAt: 2_000 + i,
        });
      }
      const session = crypto.randomUUID();
      const turn = async (text: string) => {
        const res = await pinStack.request("POST", "/v1/chat/completions", {
          headers: { authorization: "Bearer key-ann", "x-session-id": session },
          body: { model: "chat-model", messages: [{ role: "user", content: text }] },
        });
        expect(res.status).toBe(200);
        await res.json();
        const sent = pinStack.fake.chatRequests().at(-1)!.body.messages as { role: string; content: string }[];
        return (
          sent.find((m) => m.role === "system" && m.content.startsWith("What you know about the user"))?.content ?? ""
        );
      };
      // Unpinned, the share holds only some memories: related stamps, not "Manager is Sam".
      const before = await turn("Tell me about my stamp albums");
      expect(before).toContain("Collects stamps");
      expect(before).not.toContain(pinned.id);

      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${pinStack.url}/mcp`), {
          requestInit: { headers: { Authorization: "Bearer key-ann" } },
        }),
      );
      const set = await client.callTool({
        name: "set_context_preferences",
        arguments: { session_id: session, memory_ids: [pinned.id], sticky: true },
      });
      expect(parsed(set)).toMatchObject({ memoryIds: [pinned.id], sticky: true });

      const after = await turn("Tell me about my stamp albums");
      expect(after).toContain(`- [${pinned.id}] Manager is Sam`);
      expect(after).toContain("Collects stamps");
    } finally {
      await client.close();
      await pinStack.close();
    }
  });
});

describe("/mcp authentication", () => {
  it("needs a threadkeep API key like /v1/", async () => {
    const response = await fetch(`${stack.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(response.status).toBe(401);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("invalid_api_key");
  });
});
