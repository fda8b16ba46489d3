/**
 * `threadkeep mcp`: the MCP server over stdio, for MCP clients that start it as a subprocess
 * (Claude Desktop, IDEs, agents). Standard output carries the protocol only; notes go to stderr.
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Command } from "commander";
import { describeCommand } from "./_commands.js";
import { createMemory } from "../create-memory.js";
import { createMcpServer } from "../server/mcp/tools.js";
import { addStoreUrlOption } from "./_store.js";
import { resolveConfig } from "./options.js";

interface McpFlags {
  store?: string;
  user?: string;
}

async function serveMcp(flags: McpFlags): Promise<void> {
  const config = resolveConfig({ store: flags.store });
  const memory = createMemory({ store: config.store, ttlMs: config.ttlMs });
  const userId = flags.user ?? process.env.THREADKEEP_USER ?? memory.settings.defaultUserId;
  const server = createMcpServer({ memory, userId });
  const transport = new StdioServerTransport();
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await server.close();
    await memory.close();
  };
  // The client ends the server by closing its standard input.
  process.stdin.once("end", () => void close());
  transport.onclose = () => void close();
  await memory.store();
  await server.connect(transport);
}

/** Adds `threadkeep mcp`. */
export function register(program: Command): void {
  addStoreUrlOption(
    program
      .command("mcp")
      .description(describeCommand("mcp"))
      .option("--user <id>", 'the user whose sessions the tools see (env THREADKEEP_USER; default "default")'),
  )
    .addHelpText(
      "after",
      '\nExample MCP client configuration:\n  { "command": "npx", "args": ["threadkeep", "mcp", "--store", "sqlite:/path/to/threadkeep.db", "--user", "alice"] }',
    )
    .action(serveMcp);
}
