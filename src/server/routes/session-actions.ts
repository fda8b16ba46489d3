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
import { addRoute } from "../openapi/route.js";
import {
  listOf,
  Message,
  ok,
  Session,
  SessionId,
  SessionParams,
  sessionFailures,
  Summary,
  withFailures,
} from "../openapi/schemas.js";

type IdParams = { Params: { id: string } };

const ForkBody = z.strictObject({ atSeq: z.number().int().min(0).optional(), id: SessionId.optional() }).default({});

const route = withFailures(sessionFailures);

/** The contracts of summaries, fork, undo and export. */
export const sessionActionContracts = {
  summaries: route({
    method: "GET",
    url: "/v1/sessions/:id/summaries",
    summary: "Summaries of older messages, by id",
    params: SessionParams,
    responses: { "200": ok("Summaries", listOf(Summary)) },
  }),
  fork: route({
    method: "POST",
    url: "/v1/sessions/:id/fork",
    summary: "Copy the session up to atSeq (default: all) into a new session of the same owner",
    params: SessionParams,
    body: ForkBody,
    responses: { "201": ok("The new session (also in X-Session-ID)", Session) },
  }),
  undo: route({
    method: "POST",
    url: "/v1/sessions/:id/undo",
    summary: "Remove the last turn: the last user message and everything after it",
    params: SessionParams,
    responses: { "200": ok("Removed messages", listOf(Message)) },
  }),
  export: route({
    method: "GET",
    url: "/v1/sessions/:id/export",
    summary: "The session as threadkeep export JSONL (what `threadkeep import` reads)",
    params: SessionParams,
    responses: {
      "200": {
        description: "Header line, session line, then its message, summary and state lines",
        media: ["application/x-ndjson"],
      },
    },
  }),
};

/** What the session action routes need. */
export interface SessionActionDeps {
  memory: Memory;
  metrics: ServerMetrics;
}

/** Adds summaries, fork, undo and export under /v1/sessions/{id}. */
export function registerSessionActions(app: FastifyInstance, deps: SessionActionDeps): void {
  const { memory } = deps;
  const owner = (request: { userId: string }) => ({ userId: request.userId });

  addRoute<IdParams>(app, sessionActionContracts.summaries, async (request) => ({
    data: await memory.listSummaries(request.params.id, owner(request)),
  }));

  addRoute<IdParams>(app, sessionActionContracts.fork, async (request, reply) => {
    const body = parseBody(ForkBody, request.body);
    const fork = await memory.fork(request.params.id, { ...owner(request), atSeq: body.atSeq, id: body.id });
    return reply.code(201).header("x-session-id", fork.id).send(fork);
  });

  addRoute<IdParams>(app, sessionActionContracts.undo, async (request) => {
    // An undo queues with chat turns: it never cuts into a turn being committed.
    const removed = await withTurnLease({ ...deps, log: request.log }, request.params.id, () =>
      memory.undoTurn(request.params.id, owner(request)),
    );
    return { data: removed };
  });

  addRoute<IdParams>(app, sessionActionContracts.export, async (request, reply) => {
    const session = await memory.getSession(request.params.id, owner(request));
    const bundle = await readSessionBundle(await memory.store(), session);
    const lines = [headerLine(), ...(bundle ? bundleLines(bundle) : [])];
    return reply
      .type("application/x-ndjson; charset=utf-8")
      .header("content-disposition", `attachment; filename="threadkeep-${session.id}.jsonl"`)
      .send(`${lines.join("\n")}\n`);
  });
}
