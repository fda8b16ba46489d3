/**
 * The Node versions the package says it runs on are the ones its dependencies run on. Every package
 * in the lockfile that a user's install brings (the dependencies and the optional peers threadkeep is
 * tested with) must allow the oldest Node in `engines`, and 22 and 24, which users run; every package
 * of the development install must allow Node 20.20, on which the tests and CI run. A dependency
 * raised past what we say (undici 7 needs 20.18.1) fails here, not on a user's machine.
 */
import { readFileSync } from "node:fs";
import semver from "semver";
import { describe, expect, it } from "vitest";

const read = (path: string) => JSON.parse(readFileSync(new URL(path, import.meta.url), "utf8"));
const pkg = read("../../package.json") as { engines: { node: string }; peerDependencies: Record<string, string> };
const lock = read("../../package-lock.json") as {
  packages: Record<string, { version?: string; dev?: boolean; optional?: boolean; engines?: unknown }>;
};

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

const name = (path: string) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length);
const entries = Object.entries(lock.packages).filter(([path]) => path !== "");
/** A user's install: what is not a development package, and the optional peers at the tested version. */
const peers = new Set(Object.keys(pkg.peerDependencies));
const shipped = entries.filter(
  ([path, entry]) => !entry.dev || (path === `node_modules/${name(path)}` && peers.has(name(path))),
);
const oldest = semver.minVersion(pkg.engines.node)!;
const DEVELOPMENT_NODE = "20.20.0";

/** The packages of `list` whose declared Node range leaves out `version`, as `name@version (range)`. */
const refusing = (list: typeof entries, version: string) =>
  list.flatMap(([path, entry]) => {
    const range = nodeRange(entry.engines);
    return range && !semver.satisfies(version, range, { includePrerelease: true })
      ? [`${name(path)}@${entry.version} (${range})`]
      : [];
  });

describe("engines", () => {
  it("reads a lockfile with the packages it checks", () => {
    expect(shipped.length).toBeGreaterThan(50);
    expect(shipped.some(([path]) => name(path) === "undici")).toBe(true);
    for (const peer of ["postgres", "redis"]) expect(shipped.some(([path]) => name(path) === peer)).toBe(true);
  });

  for (const version of [oldest.version, "22.0.0", "24.0.0"]) {
    it(`every package a user's install brings allows Node ${version}`, () => {
      expect(refusing(shipped, version)).toEqual([]);
    });
  }

  it(`every package of the development install allows Node ${DEVELOPMENT_NODE}`, () => {
    expect(refusing(entries, DEVELOPMENT_NODE)).toEqual([]);
  });

  it("finds a package that asks for more than the oldest Node (the check can fail)", () => {
    const undici = entries.find(([path]) => path === "node_modules/undici")!;
    expect(refusing([undici], "20.18.0")).toEqual([`undici@${undici[1].version} (>=20.18.1)`]);
  });
});
