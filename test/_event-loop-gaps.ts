/**
 * Measures how long the event loop went without running a timer, e.g. while a search indexes a backlog.
 * A gap counts the time this thread ran or blocked, not the time it waited for a core: where Linux says
 * how long the thread sat in the run queue (`/proc/thread-self/schedstat`), that wait is taken off, so
 * test files running in parallel (or another process on a loaded machine) do not read as a blocked loop.
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

/** Starts a timer every `everyMs`; `onTick` runs at each tick (to sample something while the loop is free). */
export function watchEventLoop(everyMs: number, onTick?: () => void): EventLoopWatch {
  let last = performance.now();
  let lastWait = runQueueWaitMs();
  let longest = 0;
  const gapSinceLast = () => {
    const now = performance.now();
    const wait = runQueueWaitMs();
    const gap = now - last - (wait - lastWait);
    last = now;
    lastWait = wait;
    return gap;
  };
  const timer = setInterval(() => {
    longest = Math.max(longest, gapSinceLast());
    onTick?.();
  }, everyMs);
  return {
    stop: () => {
      clearInterval(timer);
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
