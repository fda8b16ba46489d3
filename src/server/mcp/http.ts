/**
 * `/mcp`: the MCP server over streamable HTTP, stateless (a server per request), behind the same API
 * keys as `/v1/`: every tool acts for the authenticated user.
 */
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { FastifyInstance } from "fastify";
import type { Memory } from "../../core/memory/memory.js";
import { createMcpServer } from "./tools.js";

/** The path the MCP endpoint is mounted at. */
export const MCP_PATH = "/mcp";

/** Adds POST /mcp (and 405 for GET and DELETE: without MCP sessions there is no stream to resume or end). */
export function registerMcpRoutes(app: FastifyInstance, deps: { memory: Memory }): void {
  app.post(MCP_PATH, async (request, reply) => {
    const server = createMcpServer({ memory: deps.memory, userId: request.userId });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    reply.hijack();
    reply.raw.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(request.raw, reply.raw, request.body);
  });
  const notAllowed = async (_request: unknown, reply: { code(n: number): { header(k: string, v: string): { send(b: unknown): unknown } } }) =>
    reply.code(405).header("allow", "POST").send({
      error: { message: "This MCP endpoint is stateless: use POST", type: "invalid_request_error", code: "method_not_allowed", param: null },
    });
  app.get(MCP_PATH, notAllowed);
  app.delete(MCP_PATH, notAllowed);
}
