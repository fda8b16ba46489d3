import { historyStart } from "../reconcile.js";
import { parseSessionId } from "../ids.js";
import type { MemoryCore } from "../memory/memory-core.js";
import type { BuildContextOptions } from "../memory/memory-options.js";
import { clearUsedPreferences } from "../state/session-state.js";
import { assembleContext } from "./assemble.js";
import { noteCoverage, windowAfterSummary } from "./coverage.js";
import { type LoadedContext, loadContext } from "./load.js";
import { knownMemoryless, sawMemories } from "../user-memories/presence.js";
import { type MemoriesInContext, selectMemories } from "./user-memories.js";
import { recallQuery, withRecall } from "./recall.js";
import { findUserRecall } from "./recall-user.js";
import { encodingForModel, messageTexts, TokenCounter } from "./tokens.js";
import type { AssembledContext } from "./types.js";
import type { MemorySemantics } from "../user-memories/api.js";
import type { UserMemory } from "../store-types.js";
import type { FullStore } from "../types.js";
import type { TokenCounter as Counter } from "./tokens.js";

/**
 * How many newest messages a context reads: the window, and with summaries on, back to the latest
 * summary while the next one is due. A window asked for explicitly (a preview) is taken as given.
 */
export function contextReach(core: MemoryCore, window: number | undefined): number {
  const reach = core.compactor.summarizer && window === undefined ? core.settings.compaction.threshold + 2 : 0;
  return (window ?? core.settings.window) + reach;
}

/** Memory's `buildContext`: loads what the session keeps and assembles the next turn's context. */
export async function buildContext(
  core: MemoryCore,
  sessionId: string,
  options: BuildContextOptions,
): Promise<AssembledContext> {
  const userId = core.owner(options);
  const id = parseSessionId(sessionId);
  // A session that does not exist yet reads as empty: the turn's first append creates it, so a turn
  // that fails before then leaves nothing behind.
  // What the turn read with its lease stands for this owner's session as it was then.
  const preloaded = options.preloaded?.userId === userId ? options.preloaded : undefined;
  const session = preloaded ? preloaded.session : await core.find(id, userId, options.session);
  const store = await core.store;
  const window = options.window ?? core.settings.window;
  const reading = contextReach(core, options.window);
  const reach = reading - window;
  const startSeq = session ? (options.historyStartsAt ?? historyStart(session)) : 1;
  // Read beside the session's own reads, so memories add no round trip to the turn.
  const memoryRead = readUserMemories(store, userId, core.memoryContext);
  const loaded: LoadedContext = session
    ? await loadContext(
        store,
        session.id,
        reading,
        options.preferences,
        { fromSeq: startSeq, upToSeq: options.upToSeq },
        preloaded,
      )
    : { history: [], summaries: [], state: { version: 0, data: {} }, preferences: options.preferences };
  const userMemories = await memoryRead;
  const tokenBudget = options.tokenBudget ?? core.settings.tokenBudget;
  const input = options.input ?? [];
  // Counted ahead, a few milliseconds at a time: a huge message must not hold the event loop.
  const counter = new TokenCounter(encodingForModel(options.model), { limit: tokenBudget });
  await counter.prepare(messageTexts([...(options.system ?? []), ...loaded.history, ...input]));
  const assemblyWindow = reach ? windowAfterSummary(loaded.history, loaded.summaries, window, reach) : window;
  const recallOn = core.recall.enabled;
  const scope = loaded.preferences?.recallScope ?? core.recall.scope;
  // The two recalls read different things (this session's older messages, the owner's other
  // sessions), so they run side by side: one more round trip each, not one after the other.
  const [recall, fromOthers] = await Promise.all([
    session && recallOn
      ? withRecall(
          core.vectors,
          store,
          {
            userId,
            sessionId: session.id,
            input,
            loaded,
            window: assemblyWindow,
            system: options.system ?? [],
            upToSeq: options.upToSeq,
          },
          core.recall,
        )
      : undefined,
    recallOn && scope === "user"
      ? findUserRecall(
          core.vectors,
          store,
          {
            userId,
            sessionId: session?.id ?? id,
            query: recallQuery(input, loaded.preferences?.recallTopic),
            activeSince: core.scope(userId).activeSince,
            maxTokens: Math.floor(tokenBudget * core.recall.budgetShare),
            counter,
            now: options.now,
          },
          core.recall,
        )
      : undefined,
  ]);
  const preferences = recall?.preferences ?? loaded.preferences;
  const memories =
    userMemories && preferences?.memories !== false
      ? await memoryNote(
          store,
          userId,
          userMemories,
          core.vectors ? { vectors: core.vectors, minScore: core.recall.minScore } : undefined,
          {
            query: recallQuery(input),
            pinned: preferences?.memoryIds,
            budget: Math.floor(tokenBudget * core.memoryContext.share),
            counter: new TokenCounter(encodingForModel(options.model), { limit: tokenBudget }),
          },
        )
      : undefined;
  const system = recall?.system ?? options.system ?? [];
  const notes = [
    ...(memories?.note ? [{ role: "system" as const, content: memories.note }] : []),
    ...(fromOthers?.note ? [fromOthers.note] : []),
  ];
  const context = assembleContext({
    system: notes.length > 0 ? [...system, ...notes] : system,
    history: recall?.history ?? loaded.history,
    summaries: loaded.summaries,
    state: loaded.state,
    input,
    window: assemblyWindow,
    tokenBudget,
    model: options.model,
    preferences,
    now: options.now,
    ...(core.settings.stateNote ? {} : { stateNote: null }),
  });
  noteCoverage(context, loaded.summaries, loaded.history[0]?.seq, startSeq ?? 1);
  if (memories) context.memories = memories.report;
  if (recall) context.recalled = recall.recalled.filter((r) => context.includedSeqs.includes(r.seq));
  if (fromOthers?.recalled.length) context.recalled = [...(context.recalled ?? []), ...fromOthers.recalled];
  if (session && loaded.stored && !loaded.stored.sticky) {
    // The context is built; failing the turn over this cleanup would be worse than applying them again.
    await clearUsedPreferences({ store, sessionId: session.id }, loaded.stored).catch((error) =>
      console.warn(`[threadkeep] clearing used preferences of session ${session.id} failed: ${error}`),
    );
  }
  return context;
}

/** The user's memories to consider for a context (the most recently updated `limit`); undefined when off. Failures cost the memories, never the turn (logged). */
async function readUserMemories(
  store: FullStore,
  userId: string,
  options: { enabled: boolean; limit: number },
): Promise<UserMemory[] | undefined> {
  if (!options.enabled || knownMemoryless(store, userId)) return undefined;
  try {
    const { memories } = await store.listUserMemories(userId, { limit: options.limit });
    sawMemories(store, userId, memories.length);
    return memories;
  } catch (error) {
    console.warn(`[threadkeep] reading the memories of user ${userId} failed; the turn goes on without them: ${error}`);
    return undefined;
  }
}

/**
 * The memory note of a turn: pinned memories older than the listed ones are read by id. When the
 * memories do not all fit and there is an embedder, they are ranked again with their closeness in
 * meaning to the new message (hybrid): one query embedding (shared with the turn's recalls) and one
 * store read, only on such turns. A failure there leaves the lexical ranking (logged).
 */
async function memoryNote(
  store: FullStore,
  userId: string,
  listed: UserMemory[],
  semantics: MemorySemantics | undefined,
  request: { query: string; pinned?: string[]; budget: number; counter: Counter },
): Promise<{ note: string | null; report: MemoriesInContext } | undefined> {
  const known = new Set(listed.map((m) => m.id));
  const unlisted = (request.pinned ?? []).filter((id) => !known.has(id));
  let memories = listed;
  if (unlisted.length > 0) {
    const read = await Promise.all(unlisted.map((id) => store.getUserMemory(userId, id).catch(() => null)));
    memories = [...listed, ...read.filter((m): m is UserMemory => m !== null && m.userId === userId)];
  }
  if (memories.length === 0 && unlisted.length === 0) return undefined;
  const lexical = selectMemories(memories, request);
  if (lexical.report.omitted === 0 || !semantics || !request.query) return lexical;
  try {
    const hits = await semantics.vectors.searchUserMemories(store, {
      userId,
      text: request.query,
      limit: memories.length,
      minScore: semantics.minScore,
    });
    return hits.length > 0
      ? selectMemories(memories, { ...request, closeness: new Map(hits.map((h) => [h.id, h.score])) })
      : lexical;
  } catch (error) {
    console.warn(
      `[threadkeep] ranking the memories of user ${userId} by meaning failed; ranked by words only: ${error}`,
    );
    return lexical;
  }
}
