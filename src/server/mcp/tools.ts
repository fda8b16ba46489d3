/**
 * threadkeep as a Model Context Protocol server: tools over one user's sessions (list, read, search,
 * recall, the context a turn would send, context preferences, conversational state) and memories (list
 * or search, get, add, update, delete: `memory.memories`, as `/v1/memories`), and each session's
 * transcript as a resource. The same server runs over stdio (`threadkeep mcp`) and streamable HTTP
 * (`/mcp` on `threadkeep serve`). Input schemas are the zod schemas the HTTP API validates with.
 */
import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { contextPreferencesSchema, SET_CONTEXT_PREFERENCES } from "../../core/context/preferences.js";
import { formatTranscript } from "../../core/context/summarize.js";
import { isThreadkeepError, ThreadkeepError } from "../../core/errors.js";
import type { Memory } from "../../core/memory/memory.js";
import { MAX_MEMORY_ID_LENGTH, MAX_MEMORY_TEXT_LENGTH } from "../../core/user-memories/api.js";
import { conversationPatchSchema } from "../../core/state/conversation.js";
import { DEFAULT_NEIGHBOURS, ListQuery, MessagesQuery, SearchParams } from "../queries.js";

/** Options of {@link createMcpServer}. */
export interface McpServerOptions {
  memory: Memory;
  /** The user every tool acts for: another owner's session is `session_not_found`. */
  userId: string;
  /** @default the package version */
  version?: string;
}

/** The tools the server offers, by name. */
export const MCP_TOOLS = [
  "list_sessions",
  "read_messages",
  "search",
  "recall",
  "show_context",
  SET_CONTEXT_PREFERENCES,
  "get_conversation_state",
  "update_conversation_state",
  "add_reference",
  "set_pending_confirmation",
  "list_memories",
  "get_memory",
  "add_memory",
  "update_memory",
  "delete_memory",
] as const;

/** The transcript resource of a session. */
export const TRANSCRIPT_TEMPLATE = "threadkeep://sessions/{sessionId}/transcript";

const sessionId = z.string().min(1).describe("The session id (a UUID, or user_{uuid}_conv_{uuid}).");

const memoryId = z.string().min(1).max(MAX_MEMORY_ID_LENGTH).describe("The memory id (as list_memories shows it).");
const memoryText = z
  .string()
  .max(MAX_MEMORY_TEXT_LENGTH)
  .describe('One short statement about the user, e.g. "Is vegetarian".');

/** Another user's memory reads exactly as one that does not exist (as `/v1/memories/{id}` answers 404). */
const memoryNotFound = (id: string) => new ThreadkeepError("not_found", `Memory ${id} not found`);

const json = (value: unknown): CallToolResult => ({
  content: [{ type: "text", text: JSON.stringify(value, null, 2) }],
  structuredContent: { result: value as never },
});

/** Runs a tool; threadkeep's coded errors become tool errors the model can read, never a protocol failure. */
async function attempt(work: () => Promise<unknown>): Promise<CallToolResult> {
  try {
    return json(await work());
  } catch (error) {
    if (!isThreadkeepError(error)) throw error;
    const body = {
      error: { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) },
    };
    return { isError: true, content: [{ type: "text", text: JSON.stringify(body) }] };
  }
}

/** A new MCP server bound to one user of `memory`. Connect it to a transport. */
export function createMcpServer(options: McpServerOptions): McpServer {
  const { memory, userId } = options;
  const owner = { userId };
  const server = new McpServer({ name: "threadkeep", version: options.version ?? "0.1.0" });

  server.registerTool(
    "list_sessions",
    {
      description: "List your conversations, most recently active first; pass nextCursor back as cursor for more.",
      inputSchema: ListQuery.partial().shape,
    },
    (args) => attempt(() => memory.listSessions({ ...owner, limit: args.limit ?? 50, cursor: args.cursor })),
  );
  server.registerTool(
    "read_messages",
    {
      description:
        "Read a conversation's messages, oldest first, each with its seq: those after `after`, at most `limit`.",
      inputSchema: { session_id: sessionId, ...MessagesQuery.partial().shape },
    },
    (args) =>
      attempt(() =>
        memory.getMessages(args.session_id, { ...owner, afterSeq: args.after ?? 0, limit: args.limit ?? 100 }),
      ),
  );
  server.registerTool(
    "search",
    {
      description:
        "Search your messages (all conversations, or one with session_id); each hit has its session, seq and a snippet.",
      inputSchema: { ...SearchParams.partial().shape, q: SearchParams.shape.q, session_id: sessionId.optional() },
    },
    (args) =>
      attempt(() =>
        memory.search(args.q, {
          ...owner,
          sessionId: args.session_id,
          limit: args.limit ?? 20,
          mode: args.mode ?? "auto",
          ranking: args.ranking,
          neighbours: args.neighbours ?? DEFAULT_NEIGHBOURS,
        }),
      ),
  );
  server.registerTool(
    "recall",
    {
      description:
        "Find the newest message of a conversation matching the text and bring it (± `around` messages) into the next turn's context.",
      inputSchema: {
        session_id: sessionId,
        text: z.string().trim().min(1),
        around: z.int().min(0).max(20).optional(),
        sticky: z.boolean().optional(),
      },
    },
    (args) =>
      attempt(() => memory.recall(args.session_id, args.text, { ...owner, around: args.around, sticky: args.sticky })),
  );
  server.registerTool(
    "show_context",
    {
      description: "Show the messages the next turn of a conversation would send to the model, and what was left out.",
      inputSchema: {
        session_id: sessionId,
        input: z.string().optional().describe("The next user message, if any."),
        model: z.string().optional(),
      },
    },
    (args) =>
      attempt(() =>
        memory.buildContext(args.session_id, {
          ...owner,
          model: args.model,
          input: args.input ? [{ role: "user", content: args.input }] : [],
        }),
      ),
  );
  server.registerTool(
    SET_CONTEXT_PREFERENCES,
    {
      description:
        "Change which parts of a conversation the next turn sees: more recent messages, an older seq range, pinned messages, no summaries, pinned memories (memory_ids) or none (memories: false).",
      inputSchema: {
        session_id: sessionId,
        ...contextPreferencesSchema.shape,
        memory_ids: contextPreferencesSchema.shape.memoryIds.describe(
          "Memories (by id) to always include in the context.",
        ),
      },
    },
    ({ session_id, memory_ids, ...preferences }) =>
      attempt(() =>
        memory.setPreferences(
          session_id,
          { ...preferences, ...(memory_ids ? { memoryIds: memory_ids } : {}) },
          { ...owner, merge: true },
        ),
      ),
  );
  server.registerTool(
    "get_conversation_state",
    {
      description:
        'Read a conversation\'s state: the last intent, the entities it refers to ("that task"), a pending confirmation.',
      inputSchema: { session_id: sessionId },
    },
    (args) => attempt(() => memory.getConversation(args.session_id, owner)),
  );
  server.registerTool(
    "update_conversation_state",
    {
      description: "Change a conversation's state: the fields given replace the stored ones, null clears them.",
      inputSchema: { session_id: sessionId, ...conversationPatchSchema.shape },
    },
    ({ session_id, ...patch }) => attempt(() => memory.patchConversation(session_id, patch, owner)),
  );
  server.registerTool(
    "add_reference",
    {
      description: 'Remember that the conversation now talks about an entity, so "that task" resolves to it.',
      inputSchema: {
        session_id: sessionId,
        type: z.string().min(1).max(64),
        id: z.union([z.string().min(1), z.number()]),
        label: z.string().max(200).optional(),
      },
    },
    ({ session_id, ...entity }) => attempt(() => memory.addReference(session_id, entity, owner)),
  );
  server.registerTool(
    "set_pending_confirmation",
    {
      description: "Record an action that waits for the user's yes or no; it expires unconfirmed after ttl_ms.",
      inputSchema: {
        session_id: sessionId,
        action: z.string().min(1).max(128),
        args: z.record(z.string(), z.unknown()).optional(),
        prompt: z.string().max(1000).optional(),
        ttl_ms: z.int().min(1000).max(86_400_000).optional(),
      },
    },
    ({ session_id, ttl_ms, ...input }) =>
      attempt(() => memory.setPendingConfirmation(session_id, { ...input, ttlMs: ttl_ms }, owner)),
  );
  server.registerTool(
    "list_memories",
    {
      description:
        "List what is remembered about the user (memories), most recently updated first; with q, those related to it, most related first. Pass nextCursor back as cursor for more.",
      inputSchema: {
        q: z.string().max(MAX_MEMORY_TEXT_LENGTH).optional().describe("Rank by relevance to this text."),
        limit: z.int().min(1).max(100).optional(),
        cursor: z.string().min(1).max(1_000).optional(),
      },
    },
    (args) =>
      attempt(() =>
        memory.memories.list({
          ...owner,
          q: args.q?.trim() ? args.q : undefined,
          limit: args.limit ?? 50,
          cursor: args.cursor,
        }),
      ),
  );
  server.registerTool(
    "get_memory",
    {
      description: "Read one memory about the user, with where it came from and its earlier texts.",
      inputSchema: { id: memoryId },
    },
    ({ id }) =>
      attempt(async () => {
        const found = await memory.memories.get(id, owner);
        if (!found) throw memoryNotFound(id);
        return found;
      }),
  );
  server.registerTool(
    "add_memory",
    {
      description: "Remember a durable fact about the user for later conversations (the user can see and correct it).",
      inputSchema: { text: memoryText, metadata: z.record(z.string(), z.unknown()).optional() },
    },
    (args) => attempt(() => memory.memories.add(args, owner)),
  );
  server.registerTool(
    "update_memory",
    {
      description: "Correct a memory about the user: the new text replaces it (the old one is kept in its history).",
      inputSchema: { id: memoryId, text: memoryText },
    },
    ({ id, text }) => attempt(() => memory.memories.update(id, { text }, owner)),
  );
  server.registerTool(
    "delete_memory",
    { description: "Forget a memory about the user, with its history.", inputSchema: { id: memoryId } },
    ({ id }) =>
      attempt(async () => {
        if (!(await memory.memories.delete(id, owner))) throw memoryNotFound(id);
        return { id, deleted: true };
      }),
  );

  server.registerResource(
    "transcript",
    new ResourceTemplate(TRANSCRIPT_TEMPLATE, {
      list: async () => {
        const page = await memory.listSessions({ ...owner, limit: 100 });
        return {
          resources: page.sessions.map((s) => ({
            uri: TRANSCRIPT_TEMPLATE.replace("{sessionId}", s.id),
            name: typeof s.metadata.title === "string" ? s.metadata.title : `session ${s.id}`,
            mimeType: "text/plain",
          })),
        };
      },
    }),
    { description: "A conversation's transcript, one message per line with its seq and role.", mimeType: "text/plain" },
    async (uri, variables) => {
      const messages = await memory.getMessages(String(variables.sessionId), owner);
      const text = formatTranscript(messages, { maxCharsPerMessage: Number.MAX_SAFE_INTEGER });
      return { contents: [{ uri: uri.href, mimeType: "text/plain", text }] };
    },
  );
  return server;
}
