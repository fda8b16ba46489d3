/**
 * The branches API under /v1/sessions/{id}/branches: what regenerate, edit and fork superseded, kept
 * and listed, read one at a time, and switched back to (ChatGPT's "< 2/2 >"). Another owner's session
 * is `session_not_found`, like a missing one.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Memory } from "../../core/memory/memory.js";
import type { Branch } from "../../core/types.js";
import { parseBody } from "./_validate.js";
import type { ServerMetrics } from "../metrics.js";
import { type TurnDeps, withTurnLease } from "../turn/lease.js";
import { addRoute } from "../openapi/route.js";
import { AnyObject, error, Message, ok, SessionParams, withFailures } from "../openapi/schemas.js";

type BranchRoute = { Params: { id: string; branchId: string } };

const BranchParams = SessionParams.extend({ branchId: z.coerce.number().int().min(1) });

const branchFields = {
  id: z.int(),
  atSeq: z.int().describe("The branch split after this seq: its first message had seq atSeq + 1"),
  parentId: z.int().nullable().describe("Null: splits from the main line; else from that branch's messages"),
  reason: z.enum(["regenerate", "edit", "fork"]),
  createdAt: z.int(),
  metadata: AnyObject,
};
const BranchSummary = z.object({ ...branchFields, messageCount: z.int() }).partial();
const route = withFailures({
  "400": error("Invalid session id or branch id (`invalid_session_id`, `invalid_request`)"),
  "401": error("Missing or unknown API key (`invalid_api_key`), or a bad end-user token (`invalid_user_token`)"),
  "404": error("No such session for this user (`session_not_found`), or no such branch (`not_found`)"),
  "503": error("The store is unavailable (`store_unavailable`)"),
});

/** The contracts of the branch routes. */
export const branchContracts = {
  list: route({
    method: "GET",
    url: "/v1/sessions/:id/branches",
    summary: "Branches: superseded answers and edits, kept (without their messages)",
    params: SessionParams,
    responses: { "200": ok("Branches by id", z.object({ data: z.array(BranchSummary) }).partial()) },
  }),
  get: route({
    method: "GET",
    url: "/v1/sessions/:id/branches/:branchId",
    summary: "One branch with its messages",
    params: BranchParams,
    responses: { "200": ok("The branch", z.object({ ...branchFields, messages: z.array(Message) }).partial()) },
  }),
  switch: route({
    method: "POST",
    url: "/v1/sessions/:id/branches/:branchId/switch",
    summary:
      "Make the branch the main line again; the branch then holds what it replaced (switch again to switch back)",
    params: BranchParams,
    responses: {
      "200": ok(
        "The branch after the swap, and the main line's messages after its atSeq",
        z.object({ branch: BranchSummary, messages: z.array(Message) }).partial(),
      ),
      "409": error("The branch splits from another branch, or its point is no longer stored (`history_conflict`)"),
    },
  }),
};

/** A branch as listed: everything but its messages, which `GET …/branches/{branchId}` returns. */
export function branchSummary(branch: Branch) {
  const { messages, ...rest } = branch;
  return { ...rest, messageCount: messages.length };
}

/** What the branch routes need. */
export interface BranchRoutesDeps {
  memory: Memory;
  metrics: ServerMetrics;
}

/** Adds the /v1/sessions/{id}/branches routes. */
export function registerBranchRoutes(app: FastifyInstance, deps: BranchRoutesDeps): void {
  const { memory } = deps;

  addRoute<{ Params: { id: string } }>(app, branchContracts.list, async (request) => {
    const branches = await memory.listBranches(request.params.id, { userId: request.userId });
    return { data: branches.map(branchSummary) };
  });

  addRoute<BranchRoute>(app, branchContracts.get, async (request) => {
    const { branchId } = parseBody(BranchParams, request.params);
    return memory.getBranch(request.params.id, branchId, { userId: request.userId });
  });

  addRoute<BranchRoute>(app, branchContracts.switch, async (request) => {
    const { branchId } = parseBody(BranchParams, request.params);
    const turn: TurnDeps = { memory, metrics: deps.metrics, log: request.log };
    // A switch rewrites the main line, so it waits for a turn in flight like an append does.
    const branch = await withTurnLease(turn, request.params.id, (fence) =>
      memory.switchBranch(request.params.id, branchId, { userId: request.userId, fence }),
    );
    const messages = await memory.getMessages(request.params.id, { userId: request.userId, afterSeq: branch.atSeq });
    return { branch: branchSummary(branch), messages };
  });
}
