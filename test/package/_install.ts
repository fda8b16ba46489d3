/**
 * Packs threadkeep as `npm pack` would publish it and installs the tarball into an empty folder, its
 * dependencies from the registry, so tests can use the package as a new user does.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { distIsFresh, ROOT } from "../_dist.js";

export { ROOT };

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
  for (const file of ["package.json", "README.md", "LICENSE", "CHANGELOG.md"])
    copyFileSync(join(ROOT, file), join(stage, file));
  cpSync(join(ROOT, "docs"), join(stage, "docs"), { recursive: true });
  if (distIsFresh()) {
    cpSync(join(ROOT, "dist"), join(stage, "dist"), { recursive: true });
  } else {
    // The package's own build script, run in the stage so the checkout's dist is left alone.
    for (const path of ["src", "scripts", "tsconfig.json", "tsconfig.build.json"])
      cpSync(join(ROOT, path), join(stage, path), { recursive: true });
    symlinkSync(join(ROOT, "node_modules"), join(stage, "node_modules"));
    await must("npm", ["run", "build"], stage);
  }
  const packed = await must("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", work], stage);
  const [info] = JSON.parse(packed.stdout) as [{ filename: string; files: { path: string }[] }];

  const app = join(work, "app");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "tk-app", private: true, type: "module" }));
  const tarball = join(work, info.filename);
  const key = await installKey();
  const kept = join(KEPT, key);
  if (process.env.THREADKEEP_TEST_FRESH_INSTALL !== "1" && existsSync(kept)) {
    // Everything but threadkeep itself as an earlier install of the same dependencies left it; npm
    // then installs the tarball into that tree as into an empty folder, keeping what is satisfied.
    linkTree(
      join(kept, "node_modules"),
      join(app, "node_modules"),
      (name) => name !== "threadkeep" && name !== ".package-lock.json",
    );
    rmSync(join(app, "node_modules", ".bin", "threadkeep"), { force: true });
    await must("npm", ["install", tarball, ...INSTALL_FLAGS], app);
    return { tarball, files: info.files.map((f) => f.path), app };
  }
  // Install scripts are skipped: better-sqlite3 would compile its addon for minutes on two cores.
  // The addon of the same version, built by the repository's own install, is copied in below.
  await must("npm", ["install", tarball, ...INSTALL_FLAGS], app);
  const addon = join("node_modules", "better-sqlite3");
  const version = (dir: string) => JSON.parse(readFileSync(join(dir, addon, "package.json"), "utf8")).version;
  if (version(app) === version(ROOT)) {
    mkdirSync(join(app, addon, "build", "Release"), { recursive: true });
    const binary = join("build", "Release", "better_sqlite3.node");
    copyFileSync(join(ROOT, addon, binary), join(app, addon, binary));
  } else {
    await must("npm", ["rebuild", "better-sqlite3"], app);
  }
  // Kept before any test touches the app: the tests only add files and rename folders, which leaves
  // the linked files of the kept copy as they were.
  keepInstall(app, kept);
  return { tarball, files: info.files.map((f) => f.path), app };
}

const INSTALL_FLAGS = ["--no-audit", "--no-fund", "--prefer-offline", "--ignore-scripts"];

/**
 * Installs of the package's dependencies kept between runs (the system's temporary folder), one per
 * {@link installKey}. Installing them takes 30–60 s on two cores, nearly all of it npm unpacking 12,000
 * files of 200 packages; a kept install is hard-linked into the app in about a second. Set
 * THREADKEEP_TEST_FRESH_INSTALL=1 to install from the registry regardless (and keep that install
 * instead).
 */
const KEPT = join(tmpdir(), "threadkeep-test-installs");

/**
 * What decides the installed tree, other than the registry's later releases: the dependency ranges
 * of package.json, the npm, Node and platform that resolve them, and the addon version copied in.
 */
async function installKey(): Promise<string> {
  const manifest = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  const fields = [
    "dependencies",
    "optionalDependencies",
    "peerDependencies",
    "peerDependenciesMeta",
    "bundleDependencies",
    "overrides",
  ];
  const npmVersion = (await must("npm", ["--version"], ROOT)).stdout.trim();
  const addon = JSON.parse(readFileSync(join(ROOT, "node_modules", "better-sqlite3", "package.json"), "utf8")).version;
  const inputs = [
    fields.map((f) => manifest[f] ?? null),
    npmVersion,
    process.version,
    process.platform,
    process.arch,
    addon,
  ];
  return createHash("sha256").update(JSON.stringify(inputs)).digest("hex").slice(0, 16);
}

/**
 * Keeps a copy (hard links) of `app`'s fresh install as `kept`, whole or not at all (renamed into
 * place); an older copy is replaced (THREADKEEP_TEST_FRESH_INSTALL=1), and of two runs that installed
 * at once, the first to keep its copy wins.
 */
function keepInstall(app: string, kept: string): void {
  mkdirSync(KEPT, { recursive: true });
  const staging = mkdtempSync(join(KEPT, "staging-"));
  linkTree(join(app, "node_modules"), join(staging, "node_modules"), () => true);
  if (process.env.THREADKEEP_TEST_FRESH_INSTALL === "1" && existsSync(kept)) renameSync(kept, `${staging}-old`);
  try {
    renameSync(staging, kept);
  } catch {
    rmSync(staging, { recursive: true, force: true });
  }
  rmSync(`${staging}-old`, { recursive: true, force: true });
}

/**
 * Copies a folder as hard links to its files (symbolic links as links), so neither copy may be
 * written in place; `keep` filters the top-level entries.
 */
function linkTree(from: string, to: string, keep: (name: string) => boolean): void {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    if (!keep(entry.name)) continue;
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isDirectory()) linkTree(source, target, () => true);
    else if (entry.isSymbolicLink()) symlinkSync(readlinkSync(source), target);
    else {
      try {
        linkSync(source, target);
      } catch (error) {
        // Another filesystem (TMPDIR elsewhere than the kept installs): a copy does as well.
        if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw error;
        copyFileSync(source, target);
      }
    }
  }
}
