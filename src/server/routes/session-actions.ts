/**
 * The session routes that change or copy history as a whole: summaries, fork, undo of the last turn,
 * and the export of one session as JSONL (the `threadkeep export` format). Like the rest of the
 * session API they act for the authenticated user only.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Memory } from "../../core/memory/memory.js";
import { bundleLines, headerLine } from "../../transfer/jsonl-format.js";
import { readSessionBundle } from "../../transfer/session-copy.js";
import { parseBody } from "./_validate.js";
import type { ServerMetrics } from "../metrics.js";
import { withTurnLease } from "../turn/lease.js";

type IdParams = { Params: { id: string } };

const ForkBody = z
  .strictObject({ atSeq: z.number().int().min(0).optional(), id: z.string().optional() })
  .default({});

/** What the session action routes need. */
export interface SessionActionDeps {
  memory: Memory;
  metrics: ServerMetrics;
}

/** Adds summaries, fork, undo and export under /v1/sessions/{id}. */
export function registerSessionActions(app: FastifyInstance, deps: SessionActionDeps): void {
  const { memory } = deps;
  const owner = (request: { userId: string }) => ({ userId: request.userId });

  app.get<IdParams>("/v1/sessions/:id/summaries", async (request) => ({
    data: await memory.listSummaries(request.params.id, owner(request)),
  }));

  app.post<IdParams>("/v1/sessions/:id/fork", async (request, reply) => {
    const body = parseBody(ForkBody, request.body);
    const fork = await memory.fork(request.params.id, { ...owner(request), atSeq: body.atSeq, id: body.id });
    return reply.code(201).header("x-session-id", fork.id).send(fork);
  });

  app.post<IdParams>("/v1/sessions/:id/undo", async (request) => {
    // An undo queues with chat turns: it never cuts into a turn being committed.
    const removed = await withTurnLease({ ...deps, log: request.log }, request.params.id, () =>
      memory.undoTurn(request.params.id, owner(request)),
    );
    return { data: removed };
  });

  app.get<IdParams>("/v1/sessions/:id/export", async (request, reply) => {
    const session = await memory.getSession(request.params.id, owner(request));
    const bundle = await readSessionBundle(await memory.store(), session);
    const lines = [headerLine(), ...(bundle ? bundleLines(bundle) : [])];
    return reply
      .type("application/x-ndjson; charset=utf-8")
      .header("content-disposition", `attachment; filename="threadkeep-${session.id}.jsonl"`)
      .send(`${lines.join("\n")}\n`);
  });
}
