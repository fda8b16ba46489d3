/**
 * Recall: a turn may bring back the few older messages of the session most related to what the user
 * just asked (or to a topic the model asked for with `set_context_preferences`), when they lie
 * outside the window and no summary covers them — by meaning with embeddings, by words without
 * (the store's lexical ranking, kept when enough of the query's words are in the message). They
 * enter the context like pinned messages (tool calls with their results, within the token budget)
 * and are reported, with their scores, as `recalled`. Recall across the owner's other sessions
 * (`scope: "user"`) is in `recall-user.ts`.
 */
import type { BackgroundEmbedder } from "../embeddings.js";
import { contentText } from "../messages.js";
import { lexicalRanks } from "../search.js";
import type { ChatMessage, Message, FullStore, SearchHit, Summary } from "../types.js";
import { terms, termShare } from "./_terms.js";
import { latestSummary } from "./compaction.js";
import { type LoadedContext, NEIGHBOURS } from "./load.js";
import type { ContextPreferences, RecalledMessage } from "./types.js";

export type { RecalledMessage };

/** Where recall looks: the session only, or also the same owner's other sessions. */
export type RecallScope = "session" | "user";

/** When and how much is recalled. */
export interface RecallOptions {
  /** Recall at all (by meaning with an embedder, by words without). @default true */
  enabled?: boolean;
  /** Most messages recalled per turn from the session itself (from other sessions, `budgetShare` bounds it). @default 3 */
  limit?: number;
  /** Least cosine similarity worth recalling (with an embedder). @default 0.3 */
  minScore?: number;
  /**
   * Least share of the query's content words a message of the session must hold to be recalled by
   * words (and at least two of them: a query of one content word recalls nothing by words). From other
   * sessions, any hit of the search ranking holding two of them is a candidate. @default 0.5
   */
  minTermShare?: number;
  /**
   * `user` also recalls from the owner's other live sessions, as quoted data in a system note (a
   * session's `recallScope` preference overrides it). @default "session"
   */
  scope?: RecallScope;
  /** Most of the token budget the other sessions' recalled text may take, as a share (0..1). @default 0.1 */
  budgetShare?: number;
  /**
   * Recall from other sessions prefers what was said in the time the message names ("last week",
   * "in May", "on 3 June, 2023"), read relative to the turn's time. @default true
   */
  dates?: boolean;
}

/** The defaults of {@link RecallOptions}. */
export const DEFAULT_RECALL: Required<RecallOptions> = {
  enabled: true,
  limit: 3,
  minScore: 0.3,
  minTermShare: 0.5,
  scope: "session",
  budgetShare: 0.1,
  dates: true,
};

/** What recall adds to a turn: messages to load (with their neighbours) and pin, and the reasons. */
export interface RecallResult {
  recalled: RecalledMessage[];
  /** Messages read around the recalled ones, so a tool call travels with its results. */
  messages: Message[];
}

/** The query of a turn: the requested topic, else the text of the last user message of the input. */
export function recallQuery(input: readonly ChatMessage[], topic?: string): string {
  if (topic?.trim()) return topic.trim();
  const user = [...input].reverse().find((m) => m.role === "user");
  return user ? contentText(user.content).trim().slice(0, 2000) : "";
}

/** Hits of the store's lexical ranking that hold at least `minTermShare` of the query's words, best first. */
export async function lexicalRecall(
  store: FullStore,
  query: {
    userId: string;
    sessionId?: string;
    text: string;
    activeSince?: number;
    afterSeq?: number;
    beforeSeq?: number;
  },
  options: Pick<Required<RecallOptions>, "minTermShare">,
  depth: number,
): Promise<{ hit: SearchHit; score: number }[]> {
  const wanted = terms(query.text);
  if (wanted.size < 2) return [];
  const hits = await lexicalRanks(store, { ...query, mode: "fulltext", limit: depth }, depth);
  return hits
    .map((hit) => ({ hit, score: termShare(wanted, contentText(hit.message.content)) }))
    .filter((h) => h.score >= options.minTermShare);
}

/** Candidates read from the lexical ranking before the window and summary bounds filter them. */
const LEXICAL_DEPTH = 50;

/**
 * Finds the messages to recall: outside the window (`seq < windowStart`), after the latest summary,
 * at least `minScore` similar (or `minTermShare` of the query's words held, without an embedder).
 * Failures cost the recall, never the turn (logged).
 */
export async function findRecall(
  vectors: BackgroundEmbedder | undefined,
  store: FullStore,
  request: {
    userId: string;
    sessionId: string;
    query: string;
    windowStart: number;
    summaries: readonly Summary[];
    upToSeq?: number;
  },
  options: Required<RecallOptions>,
): Promise<RecallResult> {
  const coveredTo = latestSummary(request.summaries)?.toSeq ?? 0;
  if (!request.query || request.windowStart - 1 <= coveredTo) return { recalled: [], messages: [] };
  try {
    const recalled = vectors
      ? (
          await vectors.search(store, {
            userId: request.userId,
            sessionId: request.sessionId,
            text: request.query,
            limit: options.limit,
            beforeSeq: request.windowStart,
            afterSeq: coveredTo,
          })
        )
          .filter((h) => (h.score ?? 0) >= options.minScore)
          .map((h) => ({ seq: h.seq, score: h.score ?? 0, query: request.query }))
      : (
          await lexicalRecall(
            store,
            {
              userId: request.userId,
              sessionId: request.sessionId,
              text: request.query,
              // Searched within the bounds, so the depth is spent on what may be recalled: unbounded,
              // a long summarized session's best matches were mostly covered ones, filtered out after.
              afterSeq: coveredTo,
              beforeSeq: request.windowStart,
            },
            options,
            LEXICAL_DEPTH,
          )
        )
          // Kept for a store written before the bounds existed, which leaves them out.
          .filter(({ hit }) => hit.seq < request.windowStart && hit.seq > coveredTo)
          .slice(0, options.limit)
          .map(({ hit, score }) => ({ seq: hit.seq, score, query: request.query }));
    // Every hit's neighbours in one read (one statement on PostgreSQL, where a read each cost a round
    // trip apiece). They stop where the history does: what follows is being replaced by this turn.
    const ranges = recalled.map((r) => ({
      sessionId: request.sessionId,
      fromSeq: r.seq - NEIGHBOURS,
      toSeq: Math.min(r.seq + NEIGHBOURS, request.upToSeq ?? Number.POSITIVE_INFINITY),
    }));
    const messages: Message[] =
      ranges.length === 0 ? [] : (await store.getMessageRanges(ranges, { userId: request.userId })).flat();
    return { recalled, messages };
  } catch (error) {
    console.warn(`[threadkeep] recall for session ${request.sessionId} failed; the turn goes on without it: ${error}`);
    return { recalled: [], messages: [] };
  }
}

/** The system note that tells the model which messages are recalled rather than recent. */
export function recallNote(seqs: readonly number[]): string {
  return (
    `Recalled from earlier in this conversation for relevance: message${seqs.length > 1 ? "s" : ""} ` +
    `${seqs.map((s) => `#${s}`).join(", ")}. Messages between them and the recent ones are not shown.`
  );
}

/** What {@link withRecall} changes about an assembly. */
export interface RecallAssembly {
  history: Message[];
  preferences?: ContextPreferences;
  system: ChatMessage[];
  recalled: RecalledMessage[];
}

/**
 * Recall for one turn: the history with the recalled messages (and neighbours) merged in, the
 * preferences pinning them, and the system note that marks them. Unchanged when nothing is recalled.
 */
export async function withRecall(
  vectors: BackgroundEmbedder | undefined,
  store: FullStore,
  turn: {
    userId: string;
    sessionId: string;
    input: readonly ChatMessage[];
    loaded: LoadedContext;
    window: number;
    system: ChatMessage[];
    upToSeq?: number;
  },
  options: Required<RecallOptions>,
): Promise<RecallAssembly> {
  const { history, preferences, summaries } = turn.loaded;
  const windowStart = history.length === 0 ? 1 : history[Math.max(0, history.length - turn.window)].seq;
  const found = await findRecall(
    vectors,
    store,
    {
      userId: turn.userId,
      sessionId: turn.sessionId,
      query: recallQuery(turn.input, preferences?.recallTopic),
      windowStart,
      summaries,
      upToSeq: turn.upToSeq,
    },
    options,
  );
  if (found.recalled.length === 0) return { history, preferences, system: turn.system, recalled: [] };
  const bySeq = new Map<number, Message>();
  for (const m of [...history, ...found.messages]) bySeq.set(m.seq, m);
  const seqs = found.recalled.map((r) => r.seq).sort((a, b) => a - b);
  return {
    history: [...bySeq.values()].sort((a, b) => a.seq - b.seq),
    preferences: { ...preferences, pinnedSeqs: [...(preferences?.pinnedSeqs ?? []), ...seqs] },
    system: [...turn.system, { role: "system", content: recallNote(seqs) }],
    recalled: found.recalled,
  };
}
