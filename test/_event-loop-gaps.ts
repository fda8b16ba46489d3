/** Measures how long the event loop went without running a timer, e.g. while a search indexes a backlog. */

/** A running watch: {@link EventLoopWatch.stop} ends it and gives the longest gap in milliseconds. */
export interface EventLoopWatch {
  stop(): number;
}

/** Starts a timer every `everyMs`; `onTick` runs at each tick (to sample something while the loop is free). */
export function watchEventLoop(everyMs: number, onTick?: () => void): EventLoopWatch {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    onTick?.();
  }, everyMs);
  return {
    stop: () => {
      clearInterval(timer);
      return Math.max(longest, performance.now() - last);
    },
  };
}
