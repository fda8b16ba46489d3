import type { Message, SessionState, FullStore, Summary } from "../types.js";
import { readPreferences } from "./preferences.js";
import type { ContextPreferences, PreloadedTurn } from "./types.js";

/** Messages read on each side of a focused or pinned seq, so a tool call travels with its results. */
export const NEIGHBOURS = 8;

/** What assembling a session's context needs, read from the store. */
export interface LoadedContext {
  /** Window, focused and pinned messages, by seq, without duplicates. */
  history: Message[];
  summaries: Summary[];
  state: SessionState;
  /** The preferences to apply: the caller's, else the stored ones. */
  preferences?: ContextPreferences;
  /** The stored preferences applied (to clear after use unless sticky); unset when the caller gave its own. */
  stored?: ContextPreferences;
}

/** Which part of the stored line a context may use. */
export interface HistoryBounds {
  /** Only summaries ending at or after this seq (earlier ones describe a superseded line). */
  fromSeq?: number;
  /** The history ends at this seq: what follows is being replaced by this turn. */
  upToSeq?: number;
}

/** Seq spans around pinned seqs, merged where they touch. */
function pinSpans(pins: readonly number[]): [number, number][] {
  const spans: [number, number][] = [];
  for (const pin of [...pins].sort((a, b) => a - b)) {
    const last = spans.at(-1);
    if (last && pin - NEIGHBOURS <= last[1] + 1) last[1] = pin + NEIGHBOURS;
    else spans.push([pin - NEIGHBOURS, pin + NEIGHBOURS]);
  }
  return spans;
}

/**
 * Reads a session's window, summaries and state at once (or takes them from what the turn read with
 * its lease); when preferences ask for more (a larger window, a focus range, pinned messages) those
 * are read next, so a plain turn costs one round.
 */
export async function loadContext(
  store: FullStore,
  sessionId: string,
  window: number,
  override?: ContextPreferences,
  bounds: HistoryBounds = {},
  preloaded?: PreloadedTurn,
): Promise<LoadedContext> {
  const upTo = bounds.upToSeq === undefined ? {} : { toSeq: bounds.upToSeq };
  const covered = preloaded !== undefined && bounds.upToSeq === undefined && preloaded.last >= window;
  const [recent, allSummaries, state] = covered
    ? [window > 0 ? preloaded.messages.slice(-window) : [], preloaded.summaries, preloaded.state]
    : await Promise.all([
        window > 0 ? store.getMessages(sessionId, { last: window, ...upTo }) : Promise.resolve([]),
        preloaded?.summaries ?? store.listSummaries(sessionId),
        preloaded?.state ?? store.getState(sessionId),
      ]);
  // Summaries of a superseded line: before the client's first message, or of messages being replaced.
  const summaries = allSummaries.filter(
    (s) => s.toSeq >= (bounds.fromSeq ?? 0) && (bounds.upToSeq === undefined || s.toSeq <= bounds.upToSeq),
  );
  const stored = override ? undefined : readPreferences(state.data);
  const preferences = override ?? stored;
  if (!preferences) return { history: recent, summaries, state };
  const reads: Promise<Message[]>[] = [];
  const cap = (to: number) => Math.min(to, bounds.upToSeq ?? to);
  if ((preferences.maxRecentMessages ?? 0) > window)
    reads.push(store.getMessages(sessionId, { last: preferences.maxRecentMessages, ...upTo }));
  const focus = preferences.focusRange;
  if (focus)
    reads.push(
      store.getMessages(sessionId, { fromSeq: focus.fromSeq - NEIGHBOURS, toSeq: cap(focus.toSeq + NEIGHBOURS) }),
    );
  for (const [from, to] of pinSpans(preferences.pinnedSeqs ?? []))
    reads.push(store.getMessages(sessionId, { fromSeq: from, toSeq: cap(to) }));
  if (reads.length === 0) return { history: recent, summaries, state, preferences, stored };
  const bySeq = new Map<number, Message>();
  for (const batch of [recent, ...(await Promise.all(reads))]) for (const m of batch) bySeq.set(m.seq, m);
  const history = [...bySeq.values()].sort((a, b) => a.seq - b.seq);
  return { history, summaries, state, preferences, stored };
}
