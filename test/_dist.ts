/**
 * The repository's build, and whether it is up to date. A test that starts threadkeep as a child
 * process runs `dist/` when it is newer than every source file (as after `npm ci` or `npm run build`,
 * which CI runs before the tests), and `src/` through tsx otherwise, so an edit is always what runs.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The newest modification time of the files under `dir` whose name `keep` accepts. */
export function newestMtime(dir: string, keep: (name: string) => boolean): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && keep(entry.name))
      newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}

/** `true` when `dist/` exists and no source file (tests aside) changed after it was built. */
export function distIsFresh(): boolean {
  const dist = join(ROOT, "dist");
  if (!existsSync(join(dist, "index.js"))) return false;
  return newestMtime(dist, () => true) >= newestMtime(join(ROOT, "src"), (name) => !name.endsWith(".test.ts"));
}

let cli: string[] | undefined;

/**
 * The arguments `node` runs the `threadkeep` command with: `dist/cli/bin.js` when the build is fresh,
 * else `src/cli/bin.ts` through tsx. From `dist/` a start takes half the CPU (1.3 s against 2.4 s to
 * "listening" for `serve`, at load 20 on 2 cores), and the suite starts dozens.
 */
export function cliArgs(): string[] {
  cli ??= distIsFresh()
    ? [join(ROOT, "dist", "cli", "bin.js")]
    : ["--import", import.meta.resolve("tsx"), join(ROOT, "src", "cli", "bin.ts")];
  return cli;
}
