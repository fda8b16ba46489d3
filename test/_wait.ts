/**
 * Waiting for a condition instead of for a fixed time: a test that sleeps a guessed number of
 * milliseconds passes on an idle machine and fails on a loaded one, where the same work takes longer.
 */
import { setTimeout as sleep } from "node:timers/promises";

/** Options of {@link until}. */
export interface UntilOptions {
  /** Give up (throw) after this long. @default 10000 */
  timeoutMs?: number;
  /** Time between checks. @default 20 */
  everyMs?: number;
}

/**
 * Resolves once `condition` holds (a check that throws counts as not yet); throws naming `what`
 * when it still does not after `timeoutMs`.
 */
export async function until(
  what: string,
  condition: () => boolean | Promise<boolean>,
  options: UntilOptions = {},
): Promise<void> {
  const { timeoutMs = 10_000, everyMs = 20 } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (
      await Promise.resolve()
        .then(condition)
        .catch(() => false)
    )
      return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await sleep(everyMs);
  }
}
