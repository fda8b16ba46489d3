/**
 * The session's turn lease around a step of a turn: turns of one session run one at a time, in
 * arrival order, across processes. A store that is down costs the turn its order, not the turn.
 */
import type { FastifyBaseLogger } from "fastify";
import { isStoreRefusal, isThreadkeepError, ThreadkeepError } from "../../core/errors.js";
import type { Memory, PreloadedTurn } from "../../core/memory/memory.js";
import type { ServerMetrics } from "../metrics.js";
import { startSpan } from "../../core/tracing.js";

/** What a turn needs from the server. */
export interface TurnDeps {
  memory: Memory;
  metrics: ServerMetrics;
  log: FastifyBaseLogger;
  /** Called after a turn is committed (memory extraction queues the session); must not block. */
  afterCommit?: (userId: string, sessionId: string) => void;
}

/**
 * Runs `fn` holding the session's turn lease, so turns of one session run in arrival order. When the
 * lease cannot be taken because the store is down, the turn still runs (unordered), as it does for
 * loading and saving; when the store refuses the lease statement (not an outage: its database needs
 * fixing) the turn fails with `store_misconfigured` (503). With `preloadFor` (the caller's user id) the turn's context is read with the
 * lease, in one round trip where the store allows, and handed to `fn`.
 */
export async function withTurnLease<T>(
  deps: TurnDeps,
  sessionId: string,
  fn: (fence: number | undefined, preloaded?: PreloadedTurn) => Promise<T>,
  preloadFor?: string,
): Promise<T> {
  let entered = false;
  // The lease's span covers the wait for the session's turn (and the context read with it, when
  // preloaded); the turn's own steps are its siblings.
  const span = startSpan("threadkeep.lease", { attributes: { "threadkeep.preload": preloadFor !== undefined } });
  const endSpan = (fenced: boolean) => {
    if (!span || !span.isRecording()) return;
    span.setAttribute("threadkeep.leased", fenced);
    span.end();
  };
  const run = (options: { preload?: boolean; userId?: string }) =>
    deps.memory.runTurn(
      sessionId,
      (lease, preloaded) => {
        entered = true;
        endSpan(true);
        return fn(lease.fence, preloaded);
      },
      options,
    );
  try {
    if (preloadFor === undefined) return await run({});
    try {
      return await run({ preload: true, userId: preloadFor });
    } catch (error) {
      // Stored data that cannot be read costs the turn its history, not its place in line: take the
      // lease alone, and let loading the context degrade as it does for every unreadable read.
      if (entered || !isThreadkeepError(error, "store_corrupt")) throw error;
      return await run({});
    }
  } catch (error) {
    if (entered) throw error;
    // An outage costs the turn its order; a database that refuses the lease statement (a missing
    // column, a permission) would cost every turn its order, silently: fail the turn instead (503,
    // logged with the SQL error and counted by the error handler), before any model call.
    if (isStoreRefusal(error)) {
      throw new ThreadkeepError(
        "store_misconfigured",
        `The turn could not take its lease: ${error.message}. The store's database needs fixing.`,
        { cause: error },
      );
    }
    if (!isThreadkeepError(error, "store_unavailable")) throw error;
    deps.log.warn(
      { err: error, sessionId },
      "store unavailable while taking the turn lease; running the turn without it",
    );
    endSpan(false);
    return fn(undefined);
  } finally {
    endSpan(false);
  }
}
