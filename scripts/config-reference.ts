/**
 * Writes the table of `threadkeep serve`'s settings into docs/configuration.md, from the command's
 * own option definitions (src/cli/serve.ts and the option groups it adds). `--check` only compares,
 * and exits 1 when the page is out of date (src/cli/config-reference.test.ts does the same).
 * Run: `npm run docs:config`.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { renderReference } from "../src/cli/_config-reference.js";

const page = fileURLToPath(new URL("../docs/configuration.md", import.meta.url));
const before = readFileSync(page, "utf8");
const after = renderReference(before);
if (process.argv.includes("--check")) {
  if (after !== before) {
    console.error("docs/configuration.md is out of date: run npm run docs:config");
    process.exitCode = 1;
  }
} else if (after !== before) {
  writeFileSync(page, after);
  console.log("docs/configuration.md updated");
}
