/**
 * Recall: with embeddings on, a turn may bring back the few older messages of the session most
 * related to what the user just asked (or to a topic the model asked for with
 * `set_context_preferences`), when they lie outside the window and no summary covers them. They
 * enter the context like pinned messages (tool calls with their results, within the token budget)
 * and are reported, with their scores, as `recalled`.
 */
import type { BackgroundEmbedder } from "../embeddings.js";
import { contentText } from "../messages.js";
import type { ChatMessage, Message, FullStore, Summary } from "../types.js";
import { latestSummary } from "./compaction.js";
import { type LoadedContext, NEIGHBOURS } from "./load.js";
import type { ContextPreferences } from "./types.js";

/** When and how much is recalled. */
export interface RecallOptions {
  /** @default true (with an embedder) */
  enabled?: boolean;
  /** Most messages recalled per turn. @default 3 */
  limit?: number;
  /** Least cosine similarity worth recalling. @default 0.3 */
  minScore?: number;
}

/** The defaults of {@link RecallOptions}. */
export const DEFAULT_RECALL: Required<RecallOptions> = { enabled: true, limit: 3, minScore: 0.3 };

/** A message brought back into the context, and why. */
export interface RecalledMessage {
  seq: number;
  /** Cosine similarity to the query. */
  score: number;
  /** What it was found for: the user's message, or the requested topic. */
  query: string;
}

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

/**
 * Finds the messages to recall: outside the window (`seq < windowStart`), after the latest summary,
 * at least `minScore` similar. Failures cost the recall, never the turn (logged).
 */
export async function findRecall(
  vectors: BackgroundEmbedder,
  store: FullStore,
  request: { userId: string; sessionId: string; query: string; windowStart: number; summaries: readonly Summary[] },
  options: Required<RecallOptions>,
): Promise<RecallResult> {
  const coveredTo = latestSummary(request.summaries)?.toSeq ?? 0;
  if (!request.query || request.windowStart - 1 <= coveredTo) return { recalled: [], messages: [] };
  try {
    const hits = await vectors.search(store, {
      userId: request.userId,
      sessionId: request.sessionId,
      text: request.query,
      limit: options.limit,
      beforeSeq: request.windowStart,
      afterSeq: coveredTo,
    });
    const recalled = hits
      .filter((h) => (h.score ?? 0) >= options.minScore)
      .map((h) => ({ seq: h.seq, score: h.score ?? 0, query: request.query }));
    const messages: Message[] = [];
    for (const r of recalled) {
      messages.push(...(await store.getMessages(request.sessionId, { fromSeq: r.seq - NEIGHBOURS, toSeq: r.seq + NEIGHBOURS })));
    }
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
  vectors: BackgroundEmbedder,
  store: FullStore,
  turn: { userId: string; sessionId: string; input: readonly ChatMessage[]; loaded: LoadedContext; window: number; system: ChatMessage[] },
  options: Required<RecallOptions>,
): Promise<RecallAssembly> {
  const { history, preferences, summaries } = turn.loaded;
  const windowStart = history.length === 0 ? 1 : history[Math.max(0, history.length - turn.window)].seq;
  const found = await findRecall(
    vectors,
    store,
    { userId: turn.userId, sessionId: turn.sessionId, query: recallQuery(turn.input, preferences?.recallTopic), windowStart, summaries },
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
