/**
 * The Node versions the package says it runs on are the ones its dependencies run on. Everything a
 * user's install brings (the dependencies, and everything they depend on in turn) must allow the
 * oldest Node in `engines`, and 22 and 24, which users run; each optional peer, at the version
 * threadkeep is tested with, must too, with everything it depends on, unless it is listed below with
 * the Node it needs (and the docs say so). Every package of the development install must allow Node
 * 20.20, on which the tests and CI run. A dependency raised past what we say (undici 7 needs 20.18.1)
 * fails here, not on a user's machine.
 */
import { readFileSync } from "node:fs";
import semver from "semver";
import { describe, expect, it } from "vitest";

const read = (path: string) => JSON.parse(readFileSync(new URL(path, import.meta.url), "utf8"));
const pkg = read("../../package.json") as { engines: { node: string }; peerDependencies: Record<string, string> };
interface LockEntry {
  version?: string;
  dev?: boolean;
  engines?: unknown;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}
const lock = read("../../package-lock.json") as { packages: Record<string, LockEntry> };

/**
 * Optional peers whose tested version needs a newer Node than the package does, and the Node versions
 * their install allows. vitest (only `threadkeep/testing` needs it): vitest 4 runs on vite 8, which
 * needs 20.19, or 22.12 and later (docs/custom-store.md says so).
 */
const PEERS_NEEDING_MORE: Record<string, string[]> = { vitest: ["20.19.0", "22.13.0", "24.0.0"] };

/** The Node range a package declares; a list of strings (an old form) counts as their intersection. */
function nodeRange(engines: unknown): string | undefined {
  if (!engines || typeof engines !== "object") return undefined;
  if (Array.isArray(engines)) {
    const ranges = engines.filter((e): e is string => typeof e === "string" && e.startsWith("node"));
    return ranges.length > 0 ? ranges.map((e) => e.replace(/^node\s*/, "")).join(" ") : undefined;
  }
  const node = (engines as { node?: unknown }).node;
  return typeof node === "string" ? node : undefined;
}

type Entries = [path: string, entry: LockEntry][];
const name = (path: string) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length);

/** Where Node finds `dependency` from the package installed at `from`: its own node_modules, then each one above. */
function resolve(from: string, dependency: string): string | undefined {
  for (let dir = from; ; dir = dir.slice(0, Math.max(0, dir.lastIndexOf("/node_modules/")))) {
    const path = `${dir ? `${dir}/` : ""}node_modules/${dependency}`;
    if (lock.packages[path]) return path;
    if (!dir) return undefined;
  }
}

/** What installing the package at `root` brings: it (unless it is the project) and its dependencies, in turn. */
function installOf(root: string): Entries {
  const found: Entries = [];
  const seen = new Set<string>();
  const queue = [root];
  while (queue.length > 0) {
    const path = queue.shift()!;
    const entry = lock.packages[path];
    if (seen.has(path) || !entry) continue;
    seen.add(path);
    if (path !== "") found.push([path, entry]);
    // The project's own development dependencies are not in `dependencies`: a user never gets them.
    for (const dependency of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies })) {
      const at = resolve(path, dependency);
      if (at) queue.push(at);
    }
  }
  return found;
}

/** The packages of `list` whose declared Node range leaves out `version`, as `name@version (range)`. */
const refusing = (list: Entries, version: string) =>
  list.flatMap(([path, entry]) => {
    const range = nodeRange(entry.engines);
    return range && !semver.satisfies(version, range, { includePrerelease: true })
      ? [`${name(path)}@${entry.version} (${range})`]
      : [];
  });

const shipped = installOf("");
const oldest = semver.minVersion(pkg.engines.node)!.version;
const DEVELOPMENT_NODE = "20.20.0";

describe("engines", () => {
  it("reads a lockfile with the packages it checks", () => {
    const names = new Set(shipped.map(([path]) => name(path)));
    expect(names.size).toBeGreaterThan(50);
    expect(names).toContain("undici");
    for (const devOnly of ["vitest", "eslint", "typescript", "redis"]) expect(names).not.toContain(devOnly);
    // A peer's install includes what it depends on.
    expect(installOf("node_modules/redis").map(([path]) => name(path))).toContain("@redis/client");
  });

  for (const version of [oldest, "22.0.0", "24.0.0"]) {
    it(`every package a user's install brings allows Node ${version}`, () => {
      expect(refusing(shipped, version)).toEqual([]);
    });
  }

  for (const peer of Object.keys(pkg.peerDependencies)) {
    const versions = PEERS_NEEDING_MORE[peer] ?? [oldest, "22.0.0", "24.0.0"];
    it(`the optional peer ${peer}, as tested, allows Node ${versions.join(", ")}`, () => {
      const install = installOf(`node_modules/${peer}`);
      expect(install.length).toBeGreaterThan(0);
      for (const version of versions) expect(refusing(install, version), version).toEqual([]);
      // A peer listed as needing more still does; else it comes off the list.
      if (PEERS_NEEDING_MORE[peer]) expect(refusing(install, oldest)).not.toEqual([]);
    });
  }

  it(`every package of the development install allows Node ${DEVELOPMENT_NODE}`, () => {
    const everything: Entries = Object.entries(lock.packages).filter(([path]) => path !== "");
    expect(refusing(everything, DEVELOPMENT_NODE)).toEqual([]);
  });

  it("finds a package that asks for more than the oldest Node (the check can fail)", () => {
    const undici = shipped.find(([path]) => path === "node_modules/undici")!;
    expect(refusing([undici], "20.18.0")).toEqual([`undici@${undici[1].version} (>=20.18.1)`]);
  });
});
