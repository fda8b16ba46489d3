/**
 * Reading a chat request: what does it mean against what the session holds? Clients differ: a thin
 * client sends only its new message (and, in a tool loop, the turn's tool calls with their results);
 * a whole-history client (Open WebUI, LibreChat, the AI SDK's `useChat`) sends the whole conversation
 * every turn and regenerates or edits by sending a different one. The request's shape alone does not
 * say which: a tool loop's follow-up looks like a short whole history, and a regenerate of the first
 * answer looks like a thin turn.
 *
 * The rule: every reading that keeps what is stored on the main line is tried first; a reading that
 * moves stored turns into a branch (regenerate, edit) is taken only on evidence — the request
 * reproduces, at their own positions on the stored line, an answer the model gave and another stored
 * message (what differs between them is edited in place); or the client is declared to send whole
 * histories. Then the model receives the request's conversation. Without evidence the turn is appended.
 * docs/how-it-works.md ("How the server decides what is new") has the decision table.
 */
import { contentText } from "./messages.js";
import type { Branch, BranchInput, ChatMessage, Message, MessageContent, Session, FullStore } from "./types.js";

/** The session metadata key under which request reading keeps what it learned. */
export const HISTORY_META_KEY = "threadkeep";

/** How a client sends its history: declared per connection, or recognised from a front-end's own headers. */
export type ClientMode = "whole-history" | "thin";

/** What a session's metadata records for request reading (under {@link HISTORY_META_KEY}). */
export interface HistoryMeta {
  /** The seq of the client's first message (moved by an edit before what the store still holds). @default 1 */
  historyStartsAt?: number;
}

/** The request-reading facts kept in a session's metadata. */
export function historyMeta(metadata: Record<string, unknown> | undefined): HistoryMeta {
  const value = metadata?.[HISTORY_META_KEY];
  if (typeof value !== "object" || value === null) return {};
  // Earlier versions also kept `client: "whole-history"`, set by any request that carried an answer
  // (tool loops included): it proves nothing and is not read.
  const start = (value as HistoryMeta).historyStartsAt;
  return typeof start === "number" ? { historyStartsAt: start } : {};
}

/** The seq of the client's first message: summaries of seqs before it belong to a superseded line. */
export const historyStart = (session?: Session): number => historyMeta(session?.metadata).historyStartsAt ?? 1;

/** What request reading decided for one request. */
export interface ReconcilePlan {
  /** How the request was read (counted in `/metrics` as `threadkeep_request_readings_total`). */
  reading: RequestReadingKind;
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

/**
 * The readings of a request: `new` (nothing stored: the request's conversation is adopted),
 * `continue` (it re-sends the stored line from its start, then new messages), `overlap` (it begins
 * with the stored line's last messages — a tool loop's follow-up — then new messages), `thin` (what
 * follows its last assistant message is new), `regenerate` and `edit` (a tail replaced, kept as a branch).
 */
export type RequestReadingKind = "new" | "continue" | "overlap" | "thin" | "regenerate" | "edit";

/** What is known of the stored main line when a request is read. */
export interface StoredView {
  /** The first stored message (the cap may have dropped older ones). */
  first?: Message;
  /** The newest stored message. */
  last?: Message;
  /** Stored messages from seq `historyStartsAt` on, contiguous; absent when not read. */
  range?: Message[];
  /** The newest stored messages, oldest first, contiguous up to `last`. */
  tail: Message[];
}

/** What reading a request needs to know besides the stored line. */
export interface ReadRequestOptions {
  /** The session's metadata (its {@link HistoryMeta}). */
  metadata?: Record<string, unknown>;
  /** How the client declared it sends history (a header, or a front-end named by its headers). */
  client?: ClientMode;
  /** Tells a stored message and a request message apart where a front-end rewrites messages. */
  same?: (stored: ChatMessage, sent: ChatMessage) => boolean;
}

const text = (content: MessageContent): string =>
  (Array.isArray(content)
    ? content.map((p) => (p.type === "text" ? (p.text ?? "") : JSON.stringify(p))).join("")
    : contentText(content)
  ).trim();

/** Tool-call arguments as their JSON value, so a client that re-serialises them (Mastra adds no spaces) still matches. */
function canonicalArguments(args: string | undefined): unknown {
  if (args === undefined) return "";
  try {
    return sortKeys(JSON.parse(args));
  } catch {
    return args.trim();
  }
}

const sortKeys = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(sortKeys)
    : value && typeof value === "object"
      ? Object.fromEntries(
          Object.keys(value)
            .sort()
            .map((k) => [k, sortKeys((value as Record<string, unknown>)[k])]),
        )
      : value;

/**
 * What makes two messages the same turn to a client: role, text, the tool calls' names and arguments
 * (as JSON values; their ids are not compared: what matters is what was called) and a tool result's
 * `tool_call_id`.
 */
export function sameMessage(a: ChatMessage, b: ChatMessage): boolean {
  const calls = (m: ChatMessage) =>
    JSON.stringify((m.tool_calls ?? []).map((c) => [c.function?.name, canonicalArguments(c.function?.arguments)]));
  return (
    a.role === b.role &&
    text(a.content) === text(b.content) &&
    calls(a) === calls(b) &&
    (a.tool_call_id ?? "") === (b.tool_call_id ?? "")
  );
}

/** What follows the request's last assistant message: a thin client's new turn. */
export const afterLastAnswer = (conversation: ChatMessage[]): ChatMessage[] =>
  conversation.slice(conversation.findLastIndex((m) => m.role === "assistant") + 1);

/**
 * An answer the model gave, as threadkeep stored it (every proxied reply records its model). A
 * client's own assistant messages (few-shot examples, a greeting, an adopted history) are not: a
 * request that reproduces only those proves nothing about a regenerate or an edit.
 */
const isModelReply = (m: Message | undefined) => m?.role === "assistant" && typeof m.metadata?.model === "string";

/**
 * Reads a chat request against the stored main line. `conversation` is the request without system
 * messages. Returns `undefined` when `view.range` is needed and was not read: read it
 * ({@link readStoredView}) and ask again.
 */
export function readRequest(
  conversation: ChatMessage[],
  view: StoredView,
  options: ReadRequestOptions = {},
): ReconcilePlan | undefined {
  const metadata = options.metadata ?? {};
  const meta = historyMeta(metadata);
  const same = options.same ?? sameMessage;
  const start = meta.historyStartsAt ?? 1;
  const n = conversation.length;
  const last = view.last?.seq ?? 0;
  const plan = (
    reading: RequestReadingKind,
    fields: Omit<ReconcilePlan, "reading" | "historyStartsAt">,
    next: HistoryMeta = meta,
  ): ReconcilePlan => withMeta(metadata, meta, { reading, ...fields }, next);

  // Nothing stored (a new or cleared session): the request's conversation is the history.
  if (view.last === undefined) return plan("new", { toStore: conversation }, {});
  if (n === 0 || options.client === "thin") return plan("thin", { toStore: newAfterAnswer(conversation, view.tail) });

  if (options.client === "whole-history") {
    if (!view.range) return undefined;
    // A declared client that trims its own window begins inside the line: it is aligned from where
    // its first two messages stand, and nothing before them is replaced.
    const head = view.range.find((m) => m.seq === start);
    if (n >= 2 && !(head && same(head, conversation[0]))) {
      const anchor = anchorOf(conversation, view.tail, same);
      if (anchor !== undefined) {
        const matched = prefixMatch(conversation, view.tail, anchor, anchor, same);
        if (anchor + matched - 1 >= last) return plan("continue", { toStore: conversation.slice(last + 1 - anchor) });
        return replaceFrom(conversation, view as Required<StoredView>, anchor, matched, metadata, meta, same);
      }
    }
    return alignByPosition(conversation, view as Required<StoredView>, metadata, meta, same);
  }

  const stored = last - start + 1;
  // How far the request reproduces the line from its start: compared once, when the line was read.
  let fromStart: number | undefined;
  const matchedFromStart = () => (fromStart ??= prefixMatch(conversation, view.range!, start, view.first!.seq, same));
  // 1. It re-sends the whole stored line, then more: append the rest.
  if (n >= stored && stored > 0) {
    if (!view.range) return undefined;
    if (matchedFromStart() >= stored) return plan("continue", { toStore: conversation.slice(stored) });
  }
  // 2. It begins with the stored line's newest messages (a tool loop's follow-up): append the rest.
  const overlap = tailOverlap(conversation, view.tail, same);
  if (overlap > 0 && overlap < n) return plan("overlap", { toStore: conversation.slice(overlap) });
  // 3. It reproduces, each at its own position on the stored line, an answer the model gave and
  // another stored message: its sender re-sends the whole conversation, and where it differs from the
  // line it was edited (in place, anywhere, or cut short: a regenerate). A lone message is never
  // enough: a thin client may ask the same again, and a whole-history client's regenerate of the
  // first answer or edit of a one-turn chat looks like a thin turn — those need the client declared.
  // A request without an assistant message cannot reproduce an answer, and needs no read.
  if (n >= 2 && conversation.some((m) => m.role === "assistant")) {
    if (!view.range) return undefined;
    const matched = matchedFromStart();
    const evidence = (upTo: number) => {
      const reproduced = alignedEqual(conversation.slice(0, upTo), view.range!, start, view.first!.seq, same);
      return reproduced.length >= 2 && reproduced.some(isModelReply);
    };
    // Past the first difference the evidence must not be a thin client's turn re-sent: a retried
    // tool-loop follow-up stands in a row at the line's end, whatever it shares with older turns.
    const anchor = anchorOf(conversation, view.tail, same);
    if (evidence(matched) || ((anchor === undefined || anchor === start) && evidence(n))) {
      return replaceFrom(conversation, view as Required<StoredView>, start, matched, metadata, meta, same);
    }
  }
  // 4. No evidence for anything else: what follows the request's last assistant message is new.
  return plan("thin", { toStore: newAfterAnswer(conversation, view.tail) });
}

/**
 * A thin turn's new messages; tool results the stored line already holds (a retried tool-loop
 * follow-up) are not stored twice.
 */
function newAfterAnswer(conversation: ChatMessage[], tail: Message[]): ChatMessage[] {
  const answered = new Set(tail.flatMap((m) => (m.role === "tool" && m.tool_call_id ? [m.tool_call_id] : [])));
  return afterLastAnswer(conversation).filter(
    (m) => !(m.role === "tool" && m.tool_call_id && answered.has(m.tool_call_id)),
  );
}

/** A plan, with the session's metadata to write when the client's first seq moves. */
function withMeta(
  metadata: Record<string, unknown>,
  before: HistoryMeta,
  fields: Omit<ReconcilePlan, "historyStartsAt">,
  next: HistoryMeta,
): ReconcilePlan {
  const start = next.historyStartsAt ?? 1;
  const planned: ReconcilePlan = { ...fields, historyStartsAt: start };
  if (start === (before.historyStartsAt ?? 1)) return planned;
  const kept: Record<string, unknown> = {
    ...(metadata[HISTORY_META_KEY] as Record<string, unknown> | undefined),
    historyStartsAt: start,
  };
  if (start === 1) delete kept.historyStartsAt;
  return { ...planned, metadata: { ...metadata, [HISTORY_META_KEY]: kept } };
}

/**
 * How many of the request's first messages equal the stored line from seq `start` on. Messages the
 * cap dropped (before `first`) cannot be compared and are taken as equal.
 */
function prefixMatch(
  conversation: ChatMessage[],
  range: Message[],
  start: number,
  first: number,
  same: ReadRequestOptions["same"] & {},
): number {
  const bySeq = new Map(range.map((m) => [m.seq, m]));
  let i = 0;
  for (; i < conversation.length; i++) {
    const seq = start + i;
    if (seq < first) continue;
    const mine = bySeq.get(seq);
    if (!mine || !same(mine, conversation[i])) break;
  }
  return i;
}

/**
 * The stored messages the request reproduces at their own positions (message `i` against seq
 * `start + i`). Messages the cap dropped (before `first`) cannot be compared and are not counted.
 */
function alignedEqual(
  conversation: ChatMessage[],
  range: Message[],
  start: number,
  first: number,
  same: ReadRequestOptions["same"] & {},
): Message[] {
  const bySeq = new Map(range.map((m) => [m.seq, m]));
  return conversation.flatMap((sent, i) => {
    const mine = start + i >= first ? bySeq.get(start + i) : undefined;
    return mine && same(mine, sent) ? [mine] : [];
  });
}

/** The seq of the newest stored message where the request's first two messages stand in a row. */
function anchorOf(
  conversation: ChatMessage[],
  tail: Message[],
  same: ReadRequestOptions["same"] & {},
): number | undefined {
  for (let i = tail.length - 2; i >= 0; i--) {
    if (same(tail[i], conversation[0]) && same(tail[i + 1], conversation[1])) return tail[i].seq;
  }
  return undefined;
}

/** The largest k such that the stored line's last k messages are the request's first k. */
function tailOverlap(conversation: ChatMessage[], tail: Message[], same: ReadRequestOptions["same"] & {}): number {
  for (let k = Math.min(conversation.length, tail.length); k > 0; k--) {
    let ok = true;
    for (let i = 0; i < k && ok; i++) ok = same(tail[tail.length - k + i], conversation[i]);
    if (ok) return k;
  }
  return 0;
}

/**
 * A regenerate or an edit: the stored line from `start + matched` is replaced and kept as a branch.
 * What the client re-sends past its first change (an edit in place keeps the rest of the chat) is
 * stored again; an answer the model gave that it reproduces at its position keeps its model, so it
 * stays evidence for the next request.
 */
function replaceFrom(
  conversation: ChatMessage[],
  view: Required<StoredView>,
  start: number,
  matched: number,
  metadata: Record<string, unknown>,
  next: HistoryMeta,
  same: ReadRequestOptions["same"] & {},
): ReconcilePlan {
  const meta = historyMeta(metadata);
  const at = start + matched - 1;
  const storedAt = (seq: number) => view.range.find((m) => m.seq === seq) ?? view.tail.find((m) => m.seq === seq);
  if (matched >= conversation.length) {
    // The request is a prefix of the stored line: it asks again for what followed.
    const following = storedAt(at + 1);
    const reading = following && following.role !== "user" ? "regenerate" : "edit";
    return withMeta(
      metadata,
      meta,
      { reading, replaceAfter: at, branch: { reason: reading }, toStore: [], upToSeq: at },
      next,
    );
  }
  const toStore = conversation.slice(matched).map((sent, i) => {
    const mine = storedAt(at + 1 + i);
    return mine && isModelReply(mine) && same(mine, sent)
      ? { ...sent, metadata: { model: mine.metadata!.model } }
      : sent;
  });
  return withMeta(
    metadata,
    meta,
    { reading: "edit", replaceAfter: at, branch: { reason: "edit" }, toStore, upToSeq: at },
    next,
  );
}

/**
 * Aligns the request of a client declared to send whole histories with the stored main line by
 * position: its first message is seq `historyStartsAt`, message `i` is seq `historyStartsAt + i`; the
 * first that differs is where the client diverged.
 */
function alignByPosition(
  conversation: ChatMessage[],
  view: Required<StoredView>,
  metadata: Record<string, unknown>,
  meta: HistoryMeta,
  same: ReadRequestOptions["same"] & {},
): ReconcilePlan {
  const start = meta.historyStartsAt ?? 1;
  const n = conversation.length;
  const first = view.first.seq;
  const last = view.last.seq;
  // The client's whole view lies before what the store still holds: an edit in the summarised part.
  // Its messages follow the stored ones' place, and the old summaries no longer describe its past.
  if (start + n - 1 < first || last < start) {
    return withMeta(
      metadata,
      meta,
      {
        reading: "edit",
        replaceAfter: first - 1,
        branch: { reason: "edit", metadata: { historyStartsAt: start } },
        toStore: conversation,
        upToSeq: first - 1,
      },
      { ...meta, historyStartsAt: first },
    );
  }
  const matched = prefixMatch(conversation, view.range, start, first, same);
  if (start + matched - 1 >= last)
    return withMeta(metadata, meta, { reading: "continue", toStore: conversation.slice(last + 1 - start) }, meta);
  return replaceFrom(conversation, view, start, matched, metadata, meta, same);
}

/**
 * After a switch to a branch made by an edit before the stored part: the line that comes back had
 * its own first seq, kept in the branch's metadata; the branch now keeps the other line's.
 */
export async function swapHistoryStart(store: FullStore, session: Session, branch: Branch): Promise<Branch> {
  const restored = branch.metadata?.historyStartsAt;
  if (typeof restored !== "number") return branch;
  const meta = historyMeta(session.metadata);
  const current = meta.historyStartsAt ?? 1;
  const next: HistoryMeta = { ...meta, historyStartsAt: restored };
  if (restored === 1) delete next.historyStartsAt;
  await store.updateSessionMetadata(session.id, { ...session.metadata, [HISTORY_META_KEY]: next });
  return store.saveBranch(session.id, { ...branch, metadata: { ...branch.metadata, historyStartsAt: current } });
}

/** Reads what {@link readRequest} compares a request of `count` messages with: one round of reads. */
export async function readStoredView(store: FullStore, session: Session, count: number): Promise<Required<StoredView>> {
  const start = historyStart(session);
  const [first, tail, range] = await Promise.all([
    store.getMessages(session.id, { limit: 1 }),
    // A regenerate or an edit by a client that trims its own window starts just before the last `count`.
    store.getMessages(session.id, { last: count + 2 }),
    store.getMessages(session.id, { fromSeq: start, toSeq: start + count }),
  ]);
  return { first: first[0], last: tail.at(-1)!, range, tail } as Required<StoredView>;
}

/**
 * The stored view a turn's preloaded window gives without another read: the newest messages, and
 * the whole line when the window holds every stored message (`complete`).
 */
export function viewFromWindow(window: Message[], complete: boolean, session: Session | undefined): StoredView {
  const view: StoredView = { last: window.at(-1), tail: window };
  if (complete) {
    const start = historyStart(session);
    view.first = window[0];
    view.range = window.filter((m) => m.seq >= start);
  }
  return view;
}
