/**
 * The caller's memories (`/v1/memories`), who the caller is (`GET /v1/users/me`) and the erasure of
 * all the caller's data (`DELETE /v1/users/me`). Every call is the authenticated user's (the key's
 * user, its end user, or the end user an operator key opened): another user's memory id is
 * `404 not_found`, exactly as one that does not exist.
 */
import { once } from "node:events";
import { PassThrough } from "node:stream";
import type { FastifyInstance } from "fastify";
import { exportSessions } from "../../transfer/export.js";
import { z } from "zod";
import { ThreadkeepError } from "../../core/errors.js";
import type { Memory } from "../../core/memory/memory.js";
import { MAX_MEMORY_ID_LENGTH, MAX_MEMORY_TEXT_LENGTH } from "../../core/user-memories/api.js";
import { parseBody } from "./_validate.js";
import { addRoute, shownAs } from "../openapi/route.js";
import { AnyObject, ok, sessionFailures, withFailures } from "../openapi/schemas.js";

const Metadata = z.record(z.string(), z.unknown());
// Core checks the text (trimmed, 1 to MAX_MEMORY_TEXT_LENGTH characters); the document says so.
const Text = shownAs(z.string(), z.string().min(1).max(MAX_MEMORY_TEXT_LENGTH));
const AddBody = z.object({ text: Text, metadata: Metadata.optional() }).strict();
const EditBody = z.object({ text: Text.optional(), metadata: Metadata.optional() }).strict();
const ListQuery = z.object({
  q: z.string().max(MAX_MEMORY_TEXT_LENGTH).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(50),
  cursor: z.string().min(1).max(1_000).optional(),
});

type IdRoute = { Params: { id: string } };

const MemoryDoc = z
  .object({
    id: z.string(),
    userId: z.string(),
    text: z.string(),
    createdAt: z.int(),
    updatedAt: z.int(),
    source: z
      .object({
        kind: z.enum(["hand", "session"]),
        sessionId: z.string().optional(),
        seqs: z.array(z.int()).optional(),
        sessionDeleted: z.boolean().optional(),
      })
      .describe(
        '`{ kind: "hand" }`, or `{ kind: "session", sessionId, seqs, sessionDeleted }` for one drawn from a turn: `sessionDeleted` is true once that session is gone (deleted, expired or erased), and the memory keeps its text',
      ),
    metadata: AnyObject,
    history: z.array(z.object({ text: z.string(), replacedAt: z.int(), reason: z.string() }).partial()),
  })
  .partial();
const UserDoc = z
  .object({
    object: z.literal("user"),
    id: z
      .string()
      .describe(
        "The user the request acts as: the key's user, its end user (`<tenant>/<end user>`), or the end user an operator key opened",
      ),
    tenant: z.string().describe("The API key's user"),
    operator: z.boolean().describe("The key is an operator key (`--api-keys key:user:operator`)"),
    canOpenUsers: z
      .boolean()
      .describe(
        "The key may open its tenant's end users with `X-Threadkeep-User` (an operator key, on a server with end users)",
      ),
  })
  .partial();
const IdParams = z.object({ id: z.string().max(MAX_MEMORY_ID_LENGTH) });
const notes = { id: "The memory's id" };
const route = withFailures(sessionFailures);

/** The contracts of /v1/memories and /v1/users/me. */
export const memoryContracts = {
  list: route({
    method: "GET",
    url: "/v1/memories",
    summary: "The caller's memories: most recently updated first, or ranked by relevance to `q`",
    query: ListQuery,
    notes: { q: "Rank by relevance to this text", limit: "Page size", cursor: "From a previous page's next_cursor" },
    responses: {
      "200": ok(
        "A page",
        z
          .object({
            object: z.literal("list"),
            data: z.array(MemoryDoc),
            next_cursor: z.string().nullable(),
            has_more: z.boolean(),
          })
          .partial(),
      ),
    },
  }),
  add: route({
    method: "POST",
    url: "/v1/memories",
    summary: "Write a memory by hand",
    body: AddBody,
    responses: { "201": ok("The memory", MemoryDoc) },
  }),
  get: route({
    method: "GET",
    url: "/v1/memories/:id",
    summary: "One of the caller's memories (another user's id is 404)",
    params: IdParams,
    notes,
    responses: { "200": ok("The memory", MemoryDoc) },
  }),
  edit: route({
    method: "PATCH",
    url: "/v1/memories/:id",
    summary: "Correct a memory: the old text is kept in its history",
    params: IdParams,
    notes,
    body: EditBody,
    responses: { "200": ok("The memory", MemoryDoc) },
  }),
  delete: route({
    method: "DELETE",
    url: "/v1/memories/:id",
    summary: "Delete a memory with its history",
    params: IdParams,
    notes,
    responses: {
      "200": ok(
        "Deleted",
        z.object({ id: z.string(), object: z.literal("memory.deleted"), deleted: z.boolean() }).partial(),
      ),
    },
  }),
  me: route({
    method: "GET",
    url: "/v1/users/me",
    summary: "Who the caller is: the user it acts as, its tenant, and whether its key is an operator key",
    responses: { "200": ok("The user", UserDoc) },
  }),
  export: route({
    method: "GET",
    url: "/v1/users/me/export",
    summary:
      "Download all of the caller's data (sessions, messages, branches, summaries, state, memories with history) as threadkeep export JSONL, streamed",
    responses: {
      "200": {
        description: "The export, one JSON record a line (docs/cli.md, the export format)",
        media: ["application/x-ndjson"],
      },
    },
  }),
  erase: route({
    method: "DELETE",
    url: "/v1/users/me",
    summary: "Erase all of the caller's data: sessions (messages, branches, summaries, vectors, state) and memories",
    responses: {
      "200": ok(
        "What was erased",
        z
          .object({ object: z.literal("user.erased"), deleted: z.boolean(), sessions: z.int(), memories: z.int() })
          .partial(),
      ),
    },
  }),
};

const notFound = (id: string) => new ThreadkeepError("not_found", `Memory ${id} not found`);

/**
 * Adds /v1/memories (list, add, get, edit, delete) and GET and DELETE /v1/users/me. `endUsers`: whether
 * the server names end users, so that an operator key has users to open.
 */
export function registerMemoryRoutes(app: FastifyInstance, deps: { memory: Memory; endUsers: boolean }): void {
  const { memory, endUsers } = deps;
  const owner = (request: { userId: string }) => ({ userId: request.userId });

  addRoute(app, memoryContracts.add, async (request, reply) => {
    const body = parseBody(AddBody, request.body);
    return reply.code(201).send(await memory.memories.add(body, owner(request)));
  });

  addRoute(app, memoryContracts.list, async (request) => {
    const query = parseBody(ListQuery, request.query);
    const q = query.q?.trim() ? query.q : undefined;
    const page = await memory.memories.list({ ...owner(request), q, limit: query.limit, cursor: query.cursor });
    return { object: "list", data: page.memories, next_cursor: page.nextCursor, has_more: page.nextCursor !== null };
  });

  addRoute<IdRoute>(app, memoryContracts.get, async (request) => {
    const found = await memory.memories.get(request.params.id, owner(request));
    if (!found) throw notFound(request.params.id);
    return found;
  });

  addRoute<IdRoute>(app, memoryContracts.edit, async (request) => {
    const body = parseBody(EditBody, request.body);
    return memory.memories.update(request.params.id, body, owner(request));
  });

  addRoute<IdRoute>(app, memoryContracts.delete, async (request) => {
    if (!(await memory.memories.delete(request.params.id, owner(request)))) throw notFound(request.params.id);
    return { id: request.params.id, object: "memory.deleted", deleted: true };
  });

  addRoute(app, memoryContracts.me, async (request) => ({
    object: "user",
    id: request.userId,
    tenant: request.tenantId,
    operator: request.operator,
    // What the inspector offers: an operator key opens end users of its tenant, when there are any.
    canOpenUsers: request.operator && endUsers,
  }));

  // The caller's own data (GDPR Art. 15/20): sessions, branches, summaries, state and memories in the
  // export format, written as it is read (a page of messages at a time), at the pace the client reads.
  addRoute(app, memoryContracts.export, async (request, reply) => {
    const store = await memory.store();
    const out = new PassThrough();
    const stop = new AbortController();
    request.raw.once("close", () => stop.abort());
    out.once("close", () => stop.abort());
    const writeLine = async (line: string) => {
      if (!out.write(`${line}\n`)) await once(out, "drain", { signal: stop.signal });
    };
    exportSessions(store, { userId: request.userId }, writeLine, { signal: stop.signal }).then(
      () => out.end(),
      (error: unknown) => {
        // Headers are gone by now: a cut stream (no trailing newline, no end) is how the client learns.
        if (!stop.signal.aborted) request.log.error({ err: error }, "export of the caller's data failed");
        out.destroy(error as Error);
      },
    );
    const name = `threadkeep-export-${new Date().toISOString().slice(0, 10)}.jsonl`;
    return reply
      .header("content-type", "application/x-ndjson; charset=utf-8")
      .header("content-disposition", `attachment; filename="${name}"`)
      .send(out);
  });

  addRoute(app, memoryContracts.erase, async (request) => {
    const erased = await memory.eraseUser(request.userId);
    return { object: "user.erased", deleted: true, sessions: erased.sessions, memories: erased.memories };
  });
}
