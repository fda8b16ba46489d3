/**
 * Runs before every test file (vitest `setupFiles`). The `quick` and `services` projects run many
 * files in one worker with one module graph (`isolate: false`), so what a file changes in the process
 * and leaves behind reaches the files after it: a mocked `console` method hides their warnings and
 * mixes its calls into their spies, fake timers stop their clocks, a changed environment variable
 * changes what they configure. Each file must end with the process as it found it; this fails the
 * file that does not, naming what it left.
 */
import { afterAll, vi } from "vitest";

const CONSOLE_METHODS = ["log", "info", "warn", "error", "debug"] as const;
const envAtStart = { ...process.env };

afterAll(() => {
  const left: string[] = [];
  for (const method of CONSOLE_METHODS) {
    if (vi.isMockFunction(console[method])) left.push(`console.${method} still mocked (vi.restoreAllMocks())`);
  }
  if (vi.isFakeTimers()) left.push("fake timers still on (vi.useRealTimers())");
  for (const key of new Set([...Object.keys(envAtStart), ...Object.keys(process.env)])) {
    if (process.env[key] !== envAtStart[key]) left.push(`process.env.${key} changed`);
  }
  if (left.length > 0) {
    // Restored here so the next file starts clean, then reported against this one.
    vi.restoreAllMocks();
    vi.useRealTimers();
    throw new Error(`this file left the shared worker changed: ${left.join("; ")}`);
  }
});
