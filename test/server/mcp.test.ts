/**
 * The MCP server through the official MCP client: over stdio (`threadkeep mcp` as a child process)
 * and over streamable HTTP (`/mcp` on the server, behind API keys). Every tool is listed and called,
 * the transcript resource is read, and another user's session is refused.
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
import { startStack, type Stack } from "./_stack.js";

const BIN = new URL("../../src/cli/bin.ts", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "tk-mcp-"));
const storeUrl = `sqlite:${join(dir, "mcp.db")}`;
let memory: Memory;
let stack: Stack;
let alice: string;
let bob: string;

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
        args: ["--import", "tsx", BIN, "mcp", "--store", storeUrl, "--user", "alice"],
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
      expect.arrayContaining(["session_id", "maxRecentMessages", "focusRange", "pinnedSeqs", "sticky", "memory_ids", "memories"]),
    );
  });

  it("lists, reads and searches the user's own sessions only", async () => {
    const listed = parsed(await call("list_sessions", {}));
    expect(listed.sessions.map((s: { id: string }) => s.id)).toEqual([alice]);
    const messages = parsed(await call("read_messages", { session_id: alice, after: 2, limit: 1 }));
    expect(messages.map((m: { seq: number; content: string }) => [m.seq, m.content])).toEqual([[3, "And one to call the plumber"]]);
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
      await call("set_pending_confirmation", { session_id: alice, action: "delete_task", args: { id: 42 }, prompt: "Delete task 42?" }),
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
    await expect(client.readResource({ uri: TRANSCRIPT_TEMPLATE.replace("{sessionId}", bob) })).rejects.toThrow(/No session/);
    expect(await memory.getState(bob, { userId: "bob" })).toEqual({ version: 0, data: {} });
  });

  it("answers bad input as a tool error naming the field", async () => {
    const result = (await call("set_context_preferences", { session_id: alice, maxRecentMessages: 0 })) as ToolResult;
    expect(result.isError).toBe(true);
    expect(result.content[0].text).toMatch(/maxRecentMessages/);
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
