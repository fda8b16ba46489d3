/**
 * `threadkeep … | head`: output into a pipe the reader closed ends quietly with exit 0, as other
 * Unix tools do, instead of an EPIPE stack trace and exit 1.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemory } from "../../src/create-memory.js";
import { cliArgs } from "../_dist.js";

const dir = mkdtempSync(join(tmpdir(), "tk-pipe-"));
const store = `sqlite:${join(dir, "pipe.db")}`;
let sessionId = "";

beforeAll(async () => {
  const memory = createMemory({ store });
  const long = "z".repeat(2000);
  for (let i = 0; i < 200; i++) {
    const id = crypto.randomUUID();
    sessionId = id;
    await memory.addMessages(id, [{ role: "user", content: `hello ${i} ${long}` }]);
  }
  await memory.addMessages(
    sessionId,
    Array.from({ length: 150 }, (_, i) => ({ role: "user" as const, content: `more ${i} ${long}` })),
  );
  await memory.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the command and closes its standard output after the first chunk, like `| head -c 1`. */
function closedEarly(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...cliArgs(), ...args], {
      env: { ...process.env, NO_COLOR: "1", THREADKEEP_STORE: "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stdout.once("data", () => child.stdout.destroy());
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stderr }));
  });
}

describe("output into a closed pipe", () => {
  it("ends quietly with exit 0 for sessions list, export and sessions show", async () => {
    const runs = await Promise.all([
      closedEarly(["sessions", "list", "--limit", "0", "--store", store]),
      closedEarly(["export", "--store", store]),
      closedEarly(["sessions", "show", sessionId, "--store", store]),
    ]);
    for (const run of runs) expect(run).toEqual({ code: 0, stderr: "" });
  }, 60_000);
});
