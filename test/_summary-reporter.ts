/**
 * Ends a test run with one plain line, `N passed, N failed, N skipped`, that any CI can read,
 * after vitest's own summary.
 */
import type { Reporter, TestModule } from "vitest/node";

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed") failed++;
        else skipped++;
      }
      // A file that failed to load has no tests to count but is still a failure.
      if (module.state() === "failed" && [...module.children.allTests()].length === 0) failed++;
    }
    failed += unhandledErrors.length;
    console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
  }
}
