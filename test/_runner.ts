/**
 * The test runner of every project: vitest's own, plus a check after each test file. The `quick` and
 * `services` projects run many files in one worker with one module graph (`isolate: false`), so what
 * a file changes in the process and leaves behind reaches the files after it: a mocked `console`
 * method hides their warnings and mixes its calls into their spies, fake timers stop their clocks, a
 * changed environment variable changes what they configure. Each file must end with the process as it
 * found it; this fails the file that does not, naming what it left, and puts the process back.
 *
 * It also fails any test that holds the event loop longer than {@link LOOP_HOLD_BOUND_MS} at a stretch
 * (issue 34: nothing may freeze the process), whatever the test is about.
 *
 * A runner, not a `setupFiles` entry: a setup file is imported and run again before every file (it
 * cost the suite ~30 s); the runner is made once per worker and its check costs microseconds.
 */
import { vi } from "vitest";
import { VitestTestRunner } from "vitest/runners";
import { type EventLoopWatch, watchEventLoop } from "./_event-loop-gaps.js";

type Suite = Parameters<VitestTestRunner["onAfterRunSuite"]>[0];
type Test = Parameters<VitestTestRunner["onBeforeTryTask"]>[0];

const CONSOLE_METHODS = ["log", "info", "warn", "error", "debug"] as const;

/**
 * The longest any test may hold its worker's event loop without a break (ms). It counts the test's own
 * synchronous work too (fixtures, loops of awaits that never yield, `spawnSync`), and synchronous disk
 * I/O, which the product's promise (another user's request waits at most 250 ms, issue 34) does not
 * cover: the tests of that promise bound the product's work more tightly themselves
 * (`withinLoopBound`). Time this worker sat in the run queue behind other processes does not count
 * (see `watchEventLoop`). In the full runs of 2026-12-08 the longest hold of any test was 508 ms (a
 * Redis Cluster failover test's thousands of `expect` calls, since made one) and, once that and a
 * `spawnSync` of `pg_dump` were fixed, 412 ms; 500 failed one of those runs, so the bound leaves the
 * rest room on a loaded machine.
 */
export const LOOP_HOLD_BOUND_MS = 1_000;
const LOOP_TICK_MS = 10;

/** The failure of a test that held the loop `longestMs` at a stretch, or null within the bound. */
export function loopHoldError(longestMs: number): Error | null {
  if (longestMs <= LOOP_HOLD_BOUND_MS) return null;
  return new Error(
    `this test held its worker's event loop for ${Math.round(longestMs)} ms at a stretch (bound ${LOOP_HOLD_BOUND_MS} ms): ` +
      "synchronous work, or a chain of awaits that never yields (a store that answers without I/O, " +
      "awaited in a loop). Find it with watchEventLoop (test/_event-loop-gaps.ts); a fixture's loop can " +
      "yield with setImmediate.",
  );
}

/** What `before` (the environment when the file started) and the process now differ in, as messages. */
export function leftBehind(before: NodeJS.ProcessEnv): string[] {
  const left: string[] = [];
  for (const method of CONSOLE_METHODS) {
    if (vi.isMockFunction(console[method])) left.push(`console.${method} still mocked (vi.restoreAllMocks())`);
  }
  if (vi.isFakeTimers()) left.push("fake timers still on (vi.useRealTimers())");
  for (const key of new Set([...Object.keys(before), ...Object.keys(process.env)])) {
    if (process.env[key] !== before[key]) left.push(`process.env.${key} changed`);
  }
  return left;
}

export default class SharedWorkerRunner extends VitestTestRunner {
  #envAtStart: NodeJS.ProcessEnv = {};
  #loop: EventLoopWatch | null = null;

  override onBeforeTryTask(test: Test): void {
    super.onBeforeTryTask(test);
    // A try that threw left its watch running (onAfterTryTask is not called then): a retry starts anew.
    this.#stopLoopWatch();
    this.#loop = watchEventLoop(LOOP_TICK_MS);
  }

  /** After the test and its `beforeEach` hooks (not when the test threw: it failed already). */
  override onAfterTryTask(test: Parameters<VitestTestRunner["onAfterTryTask"]>[0]): void {
    const longest = this.#stopLoopWatch();
    super.onAfterTryTask(test);
    const error = loopHoldError(longest);
    if (error) throw error;
  }

  override onAfterRunTask(test: Test): void {
    this.#stopLoopWatch();
    super.onAfterRunTask(test);
  }

  #stopLoopWatch(): number {
    const longest = this.#loop?.stop() ?? 0;
    this.#loop = null;
    return longest;
  }

  override async onBeforeRunSuite(suite: Suite): Promise<void> {
    if (suite.file === suite) this.#envAtStart = { ...process.env };
    return super.onBeforeRunSuite(suite);
  }

  override async onAfterRunSuite(suite: Suite): Promise<void> {
    await super.onAfterRunSuite(suite);
    if (suite.file !== suite || !suite.result) return;
    const left = leftBehind(this.#envAtStart);
    if (left.length === 0) return;
    // Put back so the next file starts clean, then fail this one.
    vi.restoreAllMocks();
    vi.useRealTimers();
    for (const key of Object.keys(process.env)) if (!(key in this.#envAtStart)) delete process.env[key];
    Object.assign(process.env, this.#envAtStart);
    const error = new Error(`this file left the shared worker changed: ${left.join("; ")}`);
    suite.result.state = "fail";
    suite.result.errors = [
      ...(suite.result.errors ?? []),
      { name: error.name, message: error.message, stack: error.stack },
    ];
  }
}
