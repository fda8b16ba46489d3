/**
 * Measures how long the event loop went without running a timer, e.g. while a search indexes a backlog.
 * A gap counts the time this thread ran or blocked, not the time it waited for a core: where Linux says
 * how long the thread sat in the run queue (`/proc/thread-self/schedstat`), that wait is taken off, so
 * test files running in parallel (or another process on a loaded machine) do not read as a blocked loop.
 * {@link listSessionsMeanwhile} is the other user whose requests the loop tests time meanwhile.
 */
import { readFileSync } from "node:fs";

/** A running watch: {@link EventLoopWatch.stop} ends it and gives the longest gap in milliseconds. */
export interface EventLoopWatch {
  stop(): number;
}

/** Milliseconds this thread has waited in the run queue so far; 0 where the kernel does not say. */
function runQueueWaitMs(): number {
  try {
    return Number(readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[1]) / 1e6;
  } catch {
    return 0;
  }
}

/**
 * The real clock and timers, as this module found them: a test's fake timers replace `performance.now`,
 * `setInterval` and `clearInterval`, and a watch must neither see the fake clock's jumps nor leave its
 * timer running because a fake `clearInterval` could not clear it.
 */
const realNow = performance.now.bind(performance);
const realSetInterval = globalThis.setInterval;
const realClearInterval = globalThis.clearInterval;

/** Starts a timer every `everyMs`; `onTick` runs at each tick (to sample something while the loop is free). */
export function watchEventLoop(everyMs: number, onTick?: () => void): EventLoopWatch {
  let last = realNow();
  let lastWait = runQueueWaitMs();
  let longest = 0;
  const gapSinceLast = () => {
    const now = realNow();
    const wait = runQueueWaitMs();
    const gap = now - last - (wait - lastWait);
    last = now;
    lastWait = wait;
    return gap;
  };
  const timer = realSetInterval(() => {
    longest = Math.max(longest, gapSinceLast());
    onTick?.();
  }, everyMs);
  timer.unref();
  return {
    stop: () => {
      realClearInterval(timer);
      return Math.max(longest, gapSinceLast());
    },
  };
}

/** What {@link withinLoopBound} measured. */
export interface LoopBoundResult<T> {
  value: T;
  /** The longest the loop went without running a timer during `fn`, in milliseconds. */
  longestMs: number;
}

/**
 * Runs `fn` with the loop watched (a timer every 5 ms) and fails, naming `what`, when the loop was held
 * longer than `boundMs` at any time during it: the monitor tests use for "no request of another user
 * waits longer than this while this work runs".
 */
export async function withinLoopBound<T>(
  what: string,
  boundMs: number,
  fn: () => Promise<T>,
): Promise<LoopBoundResult<T>> {
  const watch = watchEventLoop(5);
  let value: T;
  try {
    value = await fn();
  } catch (error) {
    watch.stop();
    throw error;
  }
  const longestMs = watch.stop();
  if (longestMs > boundMs)
    throw new Error(`${what} held the event loop for ${Math.round(longestMs)} ms (bound ${boundMs} ms)`);
  return { value, longestMs };
}

/** What {@link listSessionsMeanwhile} saw so far. */
export interface SessionLister {
  /** The slowest listing so far, in milliseconds. */
  readonly slowest: number;
  /** How many listings were answered so far. */
  readonly listed: number;
  /** Forgets the slowest listing so far, so what follows is measured alone. */
  reset(): void;
  /** Ends the loop after the listing in flight; rejects with the error of the first that failed. */
  stop(): Promise<void>;
}

/**
 * Another user listing their sessions every 20 ms, each time expecting exactly `sessionIds`, while the
 * test runs some large work: the request whose wait the loop tests bound. Each listing starts after a
 * timer, a task of its own as on a server. A failed listing ends the loop; `stop` rethrows its error.
 */
export function listSessionsMeanwhile(
  store: { listSessions(userId: string): Promise<{ sessions: { id: string }[] }> },
  userId: string,
  sessionIds: string[],
): SessionLister {
  let slowest = 0;
  let listed = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const started = performance.now();
      const page = await store.listSessions(userId);
      const ids = page.sessions.map((s) => s.id);
      if (ids.join() !== sessionIds.join())
        throw new Error(`${userId}'s sessions listed as [${ids.join(", ")}], expected [${sessionIds.join(", ")}]`);
      slowest = Math.max(slowest, performance.now() - started);
      listed++;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  // Held until `stop`: a failure ends the loop without an unhandled rejection in between.
  const ended = loop.then(
    () => undefined,
    (error: unknown) => ({ error }),
  );
  return {
    get slowest() {
      return slowest;
    },
    get listed() {
      return listed;
    },
    reset() {
      slowest = 0;
    },
    async stop() {
      stopped = true;
      const failed = await ended;
      if (failed) throw failed.error;
    },
  };
}
