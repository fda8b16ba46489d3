/**
 * Ends a test run with one plain line, `N passed, N failed, N skipped`, that any CI can read, after
 * vitest's own summary; before it, every skipped test's reason (the note of `ctx.skip(note)`), grouped
 * by file and reason, so a skip is never silent.
 */
import { relative } from "node:path";
import type { Reporter, TestCase, TestModule } from "vitest/node";

/** Why `test` was skipped, as the run should print it. */
function reasonOf(test: TestCase): string {
  const result = test.result();
  const note = result.state === "skipped" ? result.note : undefined;
  if (note) return note;
  if (test.options.mode === "todo") return `todo: ${test.fullName}`;
  // A suite skipped as a whole (a service that is not running) names its reason in its title.
  return `no reason given: ${test.fullName}`;
}

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    const reasons = new Map<string, number>();
    for (const module of testModules) {
      const file = relative(process.cwd(), module.moduleId);
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed") failed++;
        else {
          skipped++;
          const key = `${file}: ${reasonOf(test)}`;
          reasons.set(key, (reasons.get(key) ?? 0) + 1);
        }
      }
      // A file that failed to load has no tests to count but is still a failure, and so is one whose
      // tests passed but which failed as a whole (an afterAll hook, test/_runner.ts's check).
      if (module.state() === "failed" && [...module.children.allTests()].every((t) => t.result().state !== "failed"))
        failed++;
    }
    failed += unhandledErrors.length;
    if (reasons.size > 0) {
      console.log("\nSkipped, and why:");
      for (const [key, count] of [...reasons].sort(([a], [b]) => a.localeCompare(b)))
        console.log(`  ${count} × ${key}`);
    }
    console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
  }
}
