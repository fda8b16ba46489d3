/**
 * `/mcp`: the MCP server over streamable HTTP, stateless (a server per request), behind the same API
 * keys as `/v1/`: every tool acts for the authenticated user.
 */
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { FastifyInstance } from "fastify";
import type { Memory } from "../../core/memory/memory.js";
import { createMcpServer } from "./tools.js";
import { addRoute, defineRoute } from "../openapi/route.js";
import { AnyObject, ok } from "../openapi/schemas.js";

/** The path the MCP endpoint is mounted at. */
export const MCP_PATH = "/mcp";

const notOffered = (method: "GET" | "DELETE") =>
  defineRoute({
    method,
    url: MCP_PATH,
    summary: "Not offered: the endpoint is stateless (405)",
    responses: { "405": ok("Use POST") },
  });

/** The contracts of /mcp. */
export const mcpContracts = {
  post: defineRoute({
    method: "POST",
    url: MCP_PATH,
    summary:
      "Model Context Protocol over streamable HTTP (stateless): the caller's sessions as MCP tools and resources",
    // The MCP SDK reads the JSON-RPC message.
    body: AnyObject,
    responses: {
      "200": {
        description: "A JSON-RPC answer, as JSON or as a text/event-stream",
        json: AnyObject,
        media: ["text/event-stream"],
      },
    },
  }),
  get: notOffered("GET"),
  delete: notOffered("DELETE"),
};

/** Adds POST /mcp (and 405 for GET and DELETE: without MCP sessions there is no stream to resume or end). */
export function registerMcpRoutes(app: FastifyInstance, deps: { memory: Memory }): void {
  addRoute(app, mcpContracts.post, async (request, reply) => {
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
  const notAllowed = async (
    _request: unknown,
    reply: { code(n: number): { header(k: string, v: string): { send(b: unknown): unknown } } },
  ) =>
    reply
      .code(405)
      .header("allow", "POST")
      .send({
        error: {
          message: "This MCP endpoint is stateless: use POST",
          type: "invalid_request_error",
          code: "method_not_allowed",
          param: null,
        },
      });
  addRoute(app, mcpContracts.get, notAllowed);
  addRoute(app, mcpContracts.delete, notAllowed);
}
