import { historyStart } from "../reconcile.js";
import { parseSessionId } from "../ids.js";
import type { MemoryCore } from "../memory/memory-core.js";
import type { BuildContextOptions } from "../memory/memory-options.js";
import { clearUsedPreferences } from "../state/session-state.js";
import { assembleContext } from "./assemble.js";
import { noteCoverage, windowAfterSummary } from "./coverage.js";
import { type LoadedContext, loadContext } from "./load.js";
import { recallQuery, withRecall } from "./recall.js";
import { findUserRecall } from "./recall-user.js";
import { encodingForModel, messageTexts, TokenCounter } from "./tokens.js";
import type { AssembledContext } from "./types.js";

/**
 * How many newest messages a context reads: the window, and with summaries on, back to the latest
 * summary while the next one is due. A window asked for explicitly (a preview) is taken as given.
 */
export function contextReach(core: MemoryCore, window: number | undefined): number {
  const reach = core.compactor.summarizer && window === undefined ? core.settings.compaction.threshold + 2 : 0;
  return (window ?? core.settings.window) + reach;
}

/** Memory's `buildContext`: loads what the session keeps and assembles the next turn's context. */
export async function buildContext(core: MemoryCore, sessionId: string, options: BuildContextOptions): Promise<AssembledContext> {
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
  const loaded: LoadedContext = session
    ? await loadContext(store, session.id, reading, options.preferences, { fromSeq: startSeq, upToSeq: options.upToSeq }, preloaded)
    : { history: [], summaries: [], state: { version: 0, data: {} }, preferences: options.preferences };
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
      ? withRecall(core.vectors, store, { userId, sessionId: session.id, input, loaded, window: assemblyWindow, system: options.system ?? [] }, core.recall)
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
          },
          core.recall,
        )
      : undefined,
  ]);
  const system = recall?.system ?? options.system ?? [];
  const context = assembleContext({
    system: fromOthers?.note ? [...system, fromOthers.note] : system,
    history: recall?.history ?? loaded.history,
    summaries: loaded.summaries,
    state: loaded.state,
    input,
    window: assemblyWindow,
    tokenBudget,
    model: options.model,
    preferences: recall?.preferences ?? loaded.preferences,
    now: options.now,
    ...(core.settings.stateNote ? {} : { stateNote: null }),
  });
  noteCoverage(context, loaded.summaries, loaded.history[0]?.seq, startSeq ?? 1);
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
