/**
 * The runner (test/_runner.ts) fails any test that holds its worker's event loop longer than
 * LOOP_HOLD_BOUND_MS at a stretch: shown here by running vitest with it on two tests of a scratch
 * project, one that blocks the loop for 1.5 s of its own CPU (however long a loaded machine makes
 * that: the time a thread waits for a core is not counted as holding) and one that waits 1.5 s with the
 * loop free. (This very
 * file runs under the same runner, so a false alarm on an idle wait would fail it too.)
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { LOOP_HOLD_BOUND_MS, loopHoldError } from "../_runner.js";

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "tk-loop-hold-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the runner's event-loop bound", () => {
  it("fails a test that blocks the loop past the bound, and passes one that waits as long with the loop free", async () => {
    const runner = fileURLToPath(new URL("../_runner.ts", import.meta.url));
    writeFileSync(
      join(dir, "vitest.config.mjs"),
      `export default { test: { include: ["*.check.mjs"], runner: ${JSON.stringify(runner)}, reporters: ["verbose"] } };\n`,
    );
    writeFileSync(
      join(dir, "hold.check.mjs"),
      `import { it } from "vitest";
const cpu = () => { const { user, system } = process.cpuUsage(); return user + system; };
it("blocks", async () => { const start = cpu(); while (cpu() - start < 1_500_000); });
it("waits", async () => { await new Promise((resolve) => setTimeout(resolve, 1500)); });
`,
    );
    const vitest = fileURLToPath(new URL("../../node_modules/vitest/vitest.mjs", import.meta.url));
    const outcome = await run(
      process.execPath,
      [vitest, "run", "--root", dir, "--config", join(dir, "vitest.config.mjs")],
      {
        cwd: dir,
        env: { ...process.env, CI: "" },
      },
    ).then(
      (done) => ({ code: 0, output: done.stdout + done.stderr }),
      (error: { code: number; stdout: string; stderr: string }) => ({
        code: error.code,
        output: error.stdout + error.stderr,
      }),
    );
    expect(outcome.code, outcome.output).toBe(1);
    expect(outcome.output).toMatch(/held its worker's event loop for \d+ ms at a stretch \(bound 1000 ms\)/);
    expect(outcome.output).toMatch(/1 failed/);
    expect(outcome.output).toMatch(/1 passed/);
    expect(outcome.output).toMatch(/✓.*waits/);
  }, 60_000);

  it("says how long and what to look for, within the bound nothing", () => {
    expect(loopHoldError(LOOP_HOLD_BOUND_MS)).toBeNull();
    expect(loopHoldError(120)).toBeNull();
    expect(loopHoldError(1_812.4)?.message).toMatch(
      /^this test held its worker's event loop for 1812 ms at a stretch \(bound 1000 ms\)/,
    );
  });
});
