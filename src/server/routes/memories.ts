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
import { MAX_MEMORY_TEXT_LENGTH } from "../../core/user-memories/api.js";
import { parseBody } from "./_validate.js";

const Metadata = z.record(z.string(), z.unknown());
const AddBody = z.object({ text: z.string(), metadata: Metadata.optional() }).strict();
const EditBody = z.object({ text: z.string().optional(), metadata: Metadata.optional() }).strict();
const ListQuery = z.object({
  q: z.string().max(MAX_MEMORY_TEXT_LENGTH).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(50),
  cursor: z.string().min(1).max(1_000).optional(),
});

type IdParams = { Params: { id: string } };

const notFound = (id: string) => new ThreadkeepError("not_found", `Memory ${id} not found`);

/**
 * Adds /v1/memories (list, add, get, edit, delete) and GET and DELETE /v1/users/me. `endUsers`: whether
 * the server names end users, so that an operator key has users to open.
 */
export function registerMemoryRoutes(app: FastifyInstance, deps: { memory: Memory; endUsers: boolean }): void {
  const { memory, endUsers } = deps;
  const owner = (request: { userId: string }) => ({ userId: request.userId });

  app.post("/v1/memories", async (request, reply) => {
    const body = parseBody(AddBody, request.body);
    return reply.code(201).send(await memory.memories.add(body, owner(request)));
  });

  app.get("/v1/memories", async (request) => {
    const query = parseBody(ListQuery, request.query);
    const q = query.q?.trim() ? query.q : undefined;
    const page = await memory.memories.list({ ...owner(request), q, limit: query.limit, cursor: query.cursor });
    return { object: "list", data: page.memories, next_cursor: page.nextCursor, has_more: page.nextCursor !== null };
  });

  app.get<IdParams>("/v1/memories/:id", async (request) => {
    const found = await memory.memories.get(request.params.id, owner(request));
    if (!found) throw notFound(request.params.id);
    return found;
  });

  app.patch<IdParams>("/v1/memories/:id", async (request) => {
    const body = parseBody(EditBody, request.body);
    return memory.memories.update(request.params.id, body, owner(request));
  });

  app.delete<IdParams>("/v1/memories/:id", async (request) => {
    if (!(await memory.memories.delete(request.params.id, owner(request)))) throw notFound(request.params.id);
    return { id: request.params.id, object: "memory.deleted", deleted: true };
  });

  app.get("/v1/users/me", async (request) => ({
    object: "user",
    id: request.userId,
    tenant: request.tenantId,
    operator: request.operator,
    // What the inspector offers: an operator key opens end users of its tenant, when there are any.
    canOpenUsers: request.operator && endUsers,
  }));

  // The caller's own data (GDPR Art. 15/20): sessions, branches, summaries, state and memories in the
  // export format, written as it is read (a page of messages at a time), at the pace the client reads.
  app.get("/v1/users/me/export", async (request, reply) => {
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
    return reply.header("content-type", "application/x-ndjson; charset=utf-8").header("content-disposition", `attachment; filename="${name}"`).send(out);
  });

  app.delete("/v1/users/me", async (request) => {
    const erased = await memory.eraseUser(request.userId);
    return { object: "user.erased", deleted: true, sessions: erased.sessions, memories: erased.memories };
  });
}
