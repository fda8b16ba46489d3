/**
 * `npm run test:repeat` (scripts/test-repeat.mjs) on a fixture suite of two tests, one of which fails
 * on the run `FAIL_ON_RUN` names: it counts that failure once in two runs, with its first error, and
 * exits red; with no failing run it exits green. Its busy-loop processes are gone when it exits.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const CONFIG = "test/scripts/fixtures/vitest.config.ts";

/** Runs the script; resolves to its output and exit code, whatever the code. */
async function repeat(args: string[], failOnRun: string) {
  return run(process.execPath, ["scripts/test-repeat.mjs", ...args, "--config", CONFIG], {
    env: { ...process.env, FAIL_ON_RUN: failOnRun },
  }).then(
    ({ stdout }) => ({ stdout, code: 0 }),
    (error: { stdout: string; code: number }) => ({ stdout: error.stdout, code: error.code }),
  );
}

// Three vitest starts in a test: 4 s idle, 37 s measured on the project machine at a load average of 27.
describe("npm run test:repeat", { timeout: 120_000 }, () => {
  it("counts a test that failed in one of two runs, with its first error, and exits 1", async () => {
    const { stdout, code } = await repeat(["--runs", "2", "--busy-cores", "1"], "2");
    expect(stdout).toMatch(/run 1\/2: green \(2 tests/);
    expect(stdout).toMatch(/run 2\/2: 1 failed \(2 tests/);
    expect(stdout).toContain("1 of 2 runs green (1 core(s) kept busy)");
    expect(stdout).toMatch(
      / {2}1\/2 {2}test\/scripts\/fixtures\/repeat\.fixture\.ts > fails on a chosen run\n {8}first error \(run 2\): AssertionError: expected 'run 2' not to be 'run 2'/,
    );
    expect(stdout).not.toContain("always passes");
    expect(code).toBe(1);
  });

  it("exits 0 when every run is green, and refuses a missing --runs", async () => {
    const green = await repeat(["--runs", "1"], "none");
    expect(green.stdout).toContain("1 of 1 runs green");
    expect(green.stdout).not.toContain("failed tests");
    expect(green.code).toBe(0);
    const refused = await run(process.execPath, ["scripts/test-repeat.mjs", "--busy-cores", "1"]).catch(
      (error: { stderr: string; code: number }) => error,
    );
    expect(refused).toMatchObject({ code: 2, stderr: expect.stringContaining("--runs N is required") });
  });
});
