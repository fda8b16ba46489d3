/**
 * Runs every benchmark script in bench/ one after another, each in its own Node process (so one
 * script's heap does not slow the next), skipping this runner and `_`-prefixed helpers.
 * `npm run bench -- store` runs only the scripts whose names contain one of the arguments; from the
 * first argument that starts with `--` on, the arguments go to every script run
 * (`npm run bench -- retrieval --data conversations.json`). What each script answers, and its latest
 * figures: docs/benchmarks.md.
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const firstOption = args.findIndex((arg) => arg.startsWith("--"));
const filters = firstOption === -1 ? args : args.slice(0, firstOption);
const forwarded = firstOption === -1 ? [] : args.slice(firstOption);
const scripts = readdirSync(here)
  // The soak has a command of its own (npm run soak) and runs for minutes.
  .filter((file) => file.endsWith(".ts") && file !== "run.ts" && file !== "soak.ts" && !file.startsWith("_"))
  .filter((file) => filters.length === 0 || filters.some((f) => file.includes(f)))
  .sort();

let failed = 0;
for (const script of scripts) {
  console.log(`\n=== bench/${script} ===\n`);
  // --expose-gc lets scripts collect between backends, so one backend's garbage is not billed to the next.
  const run = spawnSync(process.execPath, ["--expose-gc", "--import", "tsx", join(here, script), ...forwarded], {
    stdio: "inherit",
  });
  if (run.status !== 0) {
    failed++;
    console.error(`bench/${script} failed (${run.signal ?? `exit ${run.status}`})`);
  }
}
process.exitCode = failed > 0 ? 1 : 0;
