/**
 * Packs threadkeep as `npm pack` would publish it and installs the tarball into an empty folder, its
 * dependencies from the registry, so tests can use the package as a new user does.
 */
import { spawn } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** What a command printed, and how it ended. */
export interface CommandResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end (no shell), with `input` on its standard input. */
export function run(
  command: string,
  args: string[],
  options: { cwd: string; input?: string; env?: Record<string, string>; timeoutMs?: number },
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: { ...process.env, NO_COLOR: "1", ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 120_000);
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? "");
  });
}

async function must(command: string, args: string[], cwd: string): Promise<CommandResult> {
  const result = await run(command, args, { cwd, timeoutMs: 300_000 });
  if (result.code !== 0) throw new Error(`${command} ${args.join(" ")} failed (${result.code}):\n${result.stderr}`);
  return result;
}

function newestMtime(dir: string, keep: (name: string) => boolean): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && keep(entry.name)) newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}

/** The packed and installed package. */
export interface Installed {
  /** The `.tgz` file. */
  tarball: string;
  /** Paths inside the tarball (`package/…` stripped). */
  files: string[];
  /** The app folder: `package.json` of its own and `node_modules/threadkeep`. */
  app: string;
}

/**
 * Stages the package in `work` (the repository's `dist` when it is newer than every source file, as
 * after `npm ci` or `npm run build` in CI; otherwise the build script run in the stage), packs it, and
 * installs it into `work/app`.
 */
export async function packAndInstall(work: string): Promise<Installed> {
  const stage = join(work, "stage");
  mkdirSync(stage);
  for (const file of ["package.json", "README.md", "LICENSE", "CHANGELOG.md"]) copyFileSync(join(ROOT, file), join(stage, file));
  cpSync(join(ROOT, "docs"), join(stage, "docs"), { recursive: true });
  const dist = join(ROOT, "dist");
  const sources = newestMtime(join(ROOT, "src"), (name) => !name.endsWith(".test.ts"));
  if (existsSync(join(dist, "index.js")) && newestMtime(dist, () => true) >= sources) {
    cpSync(dist, join(stage, "dist"), { recursive: true });
  } else {
    // The package's own build script, run in the stage so the checkout's dist is left alone.
    for (const path of ["src", "scripts", "tsconfig.json", "tsconfig.build.json"]) cpSync(join(ROOT, path), join(stage, path), { recursive: true });
    symlinkSync(join(ROOT, "node_modules"), join(stage, "node_modules"));
    await must("npm", ["run", "build"], stage);
  }
  const packed = await must("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", work], stage);
  const [info] = JSON.parse(packed.stdout) as [{ filename: string; files: { path: string }[] }];

  const app = join(work, "app");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "tk-app", private: true, type: "module" }));
  const tarball = join(work, info.filename);
  // Install scripts are skipped: better-sqlite3 would compile its addon for minutes on two cores.
  // The addon of the same version, built by the repository's own install, is copied in below.
  await must("npm", ["install", tarball, "--no-audit", "--no-fund", "--prefer-offline", "--ignore-scripts"], app);
  const addon = join("node_modules", "better-sqlite3");
  const version = (dir: string) => JSON.parse(readFileSync(join(dir, addon, "package.json"), "utf8")).version;
  if (version(app) === version(ROOT)) {
    mkdirSync(join(app, addon, "build", "Release"), { recursive: true });
    const binary = join("build", "Release", "better_sqlite3.node");
    copyFileSync(join(ROOT, addon, binary), join(app, addon, binary));
  } else {
    await must("npm", ["rebuild", "better-sqlite3"], app);
  }
  return { tarball, files: info.files.map((f) => f.path), app };
}
