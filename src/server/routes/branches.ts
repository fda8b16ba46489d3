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

type BranchParams = { Params: { id: string; branchId: string } };

const BranchId = z.object({ branchId: z.coerce.number().int().min(1) });

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

  app.get<{ Params: { id: string } }>("/v1/sessions/:id/branches", async (request) => {
    const branches = await memory.listBranches(request.params.id, { userId: request.userId });
    return { data: branches.map(branchSummary) };
  });

  app.get<BranchParams>("/v1/sessions/:id/branches/:branchId", async (request) => {
    const { branchId } = parseBody(BranchId, request.params);
    return memory.getBranch(request.params.id, branchId, { userId: request.userId });
  });

  app.post<BranchParams>("/v1/sessions/:id/branches/:branchId/switch", async (request) => {
    const { branchId } = parseBody(BranchId, request.params);
    const turn: TurnDeps = { memory, metrics: deps.metrics, log: request.log };
    // A switch rewrites the main line, so it waits for a turn in flight like an append does.
    const branch = await withTurnLease(turn, request.params.id, (fence) =>
      memory.switchBranch(request.params.id, branchId, { userId: request.userId, fence }),
    );
    const messages = await memory.getMessages(request.params.id, { userId: request.userId, afterSeq: branch.atSeq });
    return { branch: branchSummary(branch), messages };
  });
}
