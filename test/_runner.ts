/**
 * The test runner of every project: vitest's own, plus a check after each test file. The `quick` and
 * `services` projects run many files in one worker with one module graph (`isolate: false`), so what
 * a file changes in the process and leaves behind reaches the files after it: a mocked `console`
 * method hides their warnings and mixes its calls into their spies, fake timers stop their clocks, a
 * changed environment variable changes what they configure. Each file must end with the process as it
 * found it; this fails the file that does not, naming what it left, and puts the process back.
 *
 * A runner, not a `setupFiles` entry: a setup file is imported and run again before every file (it
 * cost the suite ~30 s); the runner is made once per worker and its check costs microseconds.
 */
import { vi } from "vitest";
import { VitestTestRunner } from "vitest/runners";

type Suite = Parameters<VitestTestRunner["onAfterRunSuite"]>[0];

const CONSOLE_METHODS = ["log", "info", "warn", "error", "debug"] as const;

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
