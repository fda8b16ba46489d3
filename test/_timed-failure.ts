/** For tests of how fast a call fails: what it failed with, its code, and how long it took. */
import { isThreadkeepError } from "../src/core/errors.js";

/** A failed call: the error, its threadkeep code (if it has one) and the milliseconds until it failed. */
export interface TimedFailure {
  error: Error;
  code: string | undefined;
  ms: number;
}

/** Calls `fn` and times its failure; throws when it succeeds instead. */
export async function timedFailure(fn: () => Promise<unknown>): Promise<TimedFailure> {
  const started = Date.now();
  try {
    await fn();
  } catch (error) {
    return { error: error as Error, code: isThreadkeepError(error) ? error.code : undefined, ms: Date.now() - started };
  }
  throw new Error("expected a failure");
}
