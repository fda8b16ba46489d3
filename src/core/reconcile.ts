/**
 * Reconciliation of whole-history clients (OpenWebUI, LibreChat, the AI SDK's useChat, LangChain):
 * they send the whole conversation every turn, and regenerate or edit by sending a different one.
 * The client's conversation is aligned with the stored main line by position and content: its first
 * message has seq `historyStartsAt` (1 unless an edit went before what the store still holds), so
 * message `i` is seq `historyStartsAt + i`. The first stored message that differs is where the
 * client diverged; what follows it is kept as a branch and the client's messages take its place.
 */
import { contentText } from "./messages.js";
import type { Branch, BranchInput, ChatMessage, Message, MessageContent, Session, SessionStore } from "./types.js";

/** The session metadata key under which reconciliation keeps what it learned. */
export const HISTORY_META_KEY = "threadkeep";

/** What a session's metadata records about its client (under {@link HISTORY_META_KEY}). */
export interface HistoryMeta {
  /** Set once a request carried history: later requests are whole histories too, even without answers. */
  client?: "whole-history";
  /** The seq of the client's first message. @default 1 */
  historyStartsAt?: number;
}

/** The reconciliation facts kept in a session's metadata. */
export function historyMeta(metadata: Record<string, unknown> | undefined): HistoryMeta {
  const value = metadata?.[HISTORY_META_KEY];
  return typeof value === "object" && value !== null ? (value as HistoryMeta) : {};
}

/** The seq of the client's first message: summaries of seqs before it belong to a superseded line. */
export const historyStart = (session?: Session): number => historyMeta(session?.metadata).historyStartsAt ?? 1;

/** True when the request may be a whole history: it carries answers, or its session's client sends them. */
export function isWholeHistory(conversation: ChatMessage[], session?: Session): boolean {
  return conversation.some((m) => m.role === "assistant") || historyMeta(session?.metadata).client === "whole-history";
}

/**
 * True when a request is reconciled as a whole history: its session's client is known to send them,
 * or the request begins where the stored line begins. A thin client that re-sends the assistant
 * message whose tool calls it answers does not, and keeps the old rule (what follows the last answer).
 */
export function startsLikeStored(conversation: ChatMessage[], stored: StoredView, session: Session): boolean {
  if (historyMeta(session.metadata).client === "whole-history") return true;
  const head = stored.range[0];
  return head !== undefined && head.seq === historyStart(session) && conversation.length > 0 && sameMessage(head, conversation[0]);
}

/** What reconciliation decided for one request. */
export interface ReconcilePlan {
  /** Replace what follows this seq with the turn (absent: append the turn). */
  replaceAfter?: number;
  /** Keep what is replaced as this branch. */
  branch?: BranchInput;
  /** The client's messages to store before the reply. */
  toStore: ChatMessage[];
  /** The stored history the model sees ends at this seq (absent: the whole main line). */
  upToSeq?: number;
  /** The seq of the client's first message for this turn (summaries before it are of another line). */
  historyStartsAt: number;
  /** The session's metadata after the turn, when it changes. */
  metadata?: Record<string, unknown>;
}

/** The stored messages reconciliation compares a request with, read in one round. */
export interface StoredView {
  first?: Message;
  last?: Message;
  /** The stored messages with seqs `start .. start + conversation.length`. */
  range: Message[];
}

const text = (content: MessageContent): string =>
  (Array.isArray(content)
    ? content.map((p) => (p.type === "text" ? (p.text ?? "") : JSON.stringify(p))).join("")
    : contentText(content)
  ).trim();

/** What makes two messages the same turn to a client: role, text, tool calls and tool call id. */
export function sameMessage(a: ChatMessage, b: ChatMessage): boolean {
  const calls = (m: ChatMessage) => JSON.stringify((m.tool_calls ?? []).map((c) => [c.function?.name, c.function?.arguments]));
  return a.role === b.role && text(a.content) === text(b.content) && calls(a) === calls(b) && (a.tool_call_id ?? "") === (b.tool_call_id ?? "");
}

/**
 * Aligns a whole-history request with the stored main line. `conversation` is the request without
 * system messages; `metadata` the session's.
 */
export function planReconcile(conversation: ChatMessage[], stored: StoredView, metadata: Record<string, unknown>): ReconcilePlan {
  const meta = historyMeta(metadata);
  const start = meta.historyStartsAt ?? 1;
  const n = conversation.length;
  const withMeta = (plan: Omit<ReconcilePlan, "historyStartsAt">, next: HistoryMeta): ReconcilePlan => {
    const merged = { ...meta, client: "whole-history" as const, ...next };
    if (merged.historyStartsAt === 1) delete merged.historyStartsAt;
    const changed = JSON.stringify(merged) !== JSON.stringify(meta);
    const planned = { ...plan, historyStartsAt: merged.historyStartsAt ?? 1 };
    return changed ? { ...planned, metadata: { ...metadata, [HISTORY_META_KEY]: merged } } : planned;
  };
  const first = stored.first?.seq;
  const last = stored.last?.seq ?? 0;
  // Nothing stored (a new or cleared session): the client's conversation is the history.
  if (first === undefined) return withMeta({ toStore: conversation }, { historyStartsAt: 1 });
  // The client's whole view lies before what the store still holds: an edit in the summarised part.
  // Its messages follow the stored ones' place, and the old summaries no longer describe its past.
  if (start + n - 1 < first || last < start) {
    return withMeta(
      { replaceAfter: first - 1, branch: { reason: "edit", metadata: { historyStartsAt: start } }, toStore: conversation, upToSeq: first - 1 },
      { historyStartsAt: first },
    );
  }
  const bySeq = new Map(stored.range.map((m) => [m.seq, m]));
  for (let seq = Math.max(first, start); seq <= Math.min(last, start + n - 1); seq++) {
    const mine = bySeq.get(seq);
    if (mine && sameMessage(mine, conversation[seq - start])) continue;
    return withMeta({ replaceAfter: seq - 1, branch: { reason: "edit" }, toStore: conversation.slice(seq - start), upToSeq: seq - 1 }, {});
  }
  if (last > start + n - 1) {
    // The client's history is a prefix of the stored one: it asks again for what followed.
    const next = bySeq.get(start + n);
    const reason = next && next.role !== "user" ? "regenerate" : "edit";
    return withMeta({ replaceAfter: start + n - 1, branch: { reason }, toStore: [], upToSeq: start + n - 1 }, {});
  }
  return withMeta({ toStore: conversation.slice(last + 1 - start) }, {});
}

/**
 * After a switch to a branch made by an edit before the stored part: the line that comes back had
 * its own first seq, kept in the branch's metadata; the branch now keeps the other line's.
 */
export async function swapHistoryStart(store: SessionStore, session: Session, branch: Branch): Promise<Branch> {
  const restored = branch.metadata?.historyStartsAt;
  if (typeof restored !== "number") return branch;
  const meta = historyMeta(session.metadata);
  const current = meta.historyStartsAt ?? 1;
  const next: HistoryMeta = { ...meta, historyStartsAt: restored };
  if (restored === 1) delete next.historyStartsAt;
  await store.updateSessionMetadata(session.id, { ...session.metadata, [HISTORY_META_KEY]: next });
  return store.saveBranch(session.id, { ...branch, metadata: { ...branch.metadata, historyStartsAt: current } });
}

/** Reads what {@link planReconcile} compares a request of `count` messages with: one round of reads. */
export async function readStoredView(store: SessionStore, session: Session, count: number): Promise<StoredView> {
  const start = historyStart(session);
  const [first, last, range] = await Promise.all([
    store.getMessages(session.id, { limit: 1 }),
    store.getMessages(session.id, { last: 1 }),
    store.getMessages(session.id, { fromSeq: start, toSeq: start + count }),
  ]);
  return { first: first[0], last: last[0], range };
}
