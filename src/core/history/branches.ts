import { appendMessagesOf, saveSummaryOf } from "../incarnation.js";
import { ThreadkeepError } from "../errors.js";
import { newSessionId, parseSessionId } from "../ids.js";
import type { MemoryCore } from "../memory/memory-core.js";
import type { OwnerOptions } from "../memory/memory-options.js";
import { swapHistoryStart } from "../reconcile.js";
import type { Branch, BranchInput, Message, Session } from "../types.js";

// The history methods of Memory: pop, undo, clear, fork and the branches of a session.

export async function clear(core: MemoryCore, sessionId: string, options: OwnerOptions): Promise<void> {
  const session = await core.resolve(sessionId, core.owner(options), false);
  const store = await core.store;
  await core.delete(session.id);
  await store.createSession({
    id: session.id,
    userId: session.userId,
    metadata: session.metadata,
    createdAt: session.createdAt,
  });
}

export async function undoTurn(core: MemoryCore, sessionId: string, options: OwnerOptions): Promise<Message[]> {
  const session = await core.resolve(sessionId, core.owner(options), false);
  const store = await core.store;
  const tail = await store.getMessages(session.id, { last: 200 });
  const lastUser = tail.findLastIndex((m) => m.role === "user");
  if (lastUser < 0) return [];
  const removed = tail.slice(lastUser);
  await store.truncateAfter(session.id, removed[0].seq - 1);
  return removed;
}

export async function fork(
  core: MemoryCore,
  sessionId: string,
  options: OwnerOptions & { atSeq?: number; id?: string },
): Promise<Session> {
  const source = await core.resolve(sessionId, core.owner(options), false);
  const store = await core.store;
  const id = options.id ? parseSessionId(options.id) : newSessionId();
  const messages = await store.getMessages(source.id, options.atSeq === undefined ? {} : { toSeq: options.atSeq });
  const offset = (messages[0]?.seq ?? 1) - 1;
  const fork = await store.createSession({
    id,
    userId: source.userId,
    metadata: { ...source.metadata, forkedFrom: { sessionId: source.id, atSeq: messages.at(-1)?.seq ?? 0 } },
  });
  for (let i = 0; i < messages.length; i += 100) {
    const batch = messages.slice(i, i + 100).map(({ seq: _s, createdAt: _c, ...input }) => input);
    // Only into this fork: a session deleted and created again under its id meanwhile refuses it.
    await appendMessagesOf(store, fork, batch);
  }
  const lastCopied = messages.at(-1)?.seq ?? 0;
  for (const summary of await store.listSummaries(source.id)) {
    if (summary.toSeq > lastCopied) continue;
    // Summaries of dropped messages describe what came "before seq 1" of the copy; saved only into
    // this fork, not into a session deleted and created again under its id meanwhile.
    await saveSummaryOf(store, fork, {
      fromSeq: Math.max(0, summary.fromSeq - offset),
      toSeq: Math.max(0, summary.toSeq - offset),
      content: summary.content,
      metadata: summary.metadata,
    });
  }
  const state = await store.getState(source.id);
  if (state.version > 0) await store.setState(id, state.data, 0);
  return fork;
}

export async function pop(core: MemoryCore, sessionId: string, options: OwnerOptions): Promise<Message | null> {
  const session = await core.resolve(sessionId, core.owner(options), false);
  return (await core.store).popMessage(session.id);
}

export async function listBranches(core: MemoryCore, sessionId: string, options: OwnerOptions): Promise<Branch[]> {
  const session = await core.resolve(sessionId, core.owner(options), false);
  return (await core.store).listBranches(session.id);
}

export async function getBranch(
  core: MemoryCore,
  sessionId: string,
  branchId: number,
  options: OwnerOptions,
): Promise<Branch> {
  const found = (await listBranches(core, sessionId, options)).find((b) => b.id === branchId);
  if (!found) throw new ThreadkeepError("not_found", `No branch ${branchId} in session ${sessionId}`);
  return found;
}

export async function switchBranch(
  core: MemoryCore,
  sessionId: string,
  branchId: number,
  options: OwnerOptions & { fence?: number },
): Promise<Branch> {
  const session = await core.resolve(sessionId, core.owner(options), false);
  const store = await core.store;
  return swapHistoryStart(store, session, await store.switchBranch(session.id, branchId, { fence: options.fence }));
}

export async function branchAt(
  core: MemoryCore,
  sessionId: string,
  seq: number,
  options: OwnerOptions & { reason?: BranchInput["reason"]; metadata?: Record<string, unknown>; fence?: number },
): Promise<Branch | null> {
  const session = await core.resolve(sessionId, core.owner(options), false);
  const store = await core.store;
  const before = (await store.listBranches(session.id)).at(-1)?.id ?? 0;
  await store.replaceAfter(session.id, seq, [], {
    fence: options.fence,
    branch: { reason: options.reason ?? "fork", metadata: options.metadata },
  });
  const after = (await store.listBranches(session.id)).at(-1);
  return after && after.id > before ? after : null;
}
