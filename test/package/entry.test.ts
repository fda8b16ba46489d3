/**
 * The package's entries hold what they promise: `threadkeep` is the application API, kept small
 * (issue #36: 70 runtime names or fewer), and the tools for writing a store are at `threadkeep/kit`,
 * where the third-party store fixtures find everything they import that is not the application's.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import * as main from "../../src/index.js";
import * as kit from "../../src/stores/kit.js";

const MAX_MAIN_NAMES = 70;
const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  exports: Record<string, { types: string; import: string } | string>;
};

/** The module specifiers a source file imports from. */
const importsOf = (path: string) =>
  [
    ...readFileSync(new URL(path, import.meta.url), "utf8").matchAll(
      /^\s*(?:import|export)\b[^;]*?\bfrom\s+"([^"]+)"/gms,
    ),
  ].map((m) => m[1]);

describe("the main entry", () => {
  it(`exports at most ${MAX_MAIN_NAMES} runtime names`, () => {
    const names = Object.keys(main);
    expect(names.length, names.sort().join(" ")).toBeLessThanOrEqual(MAX_MAIN_NAMES);
    expect(names).toContain("createMemory");
  });

  it("shares no runtime name with threadkeep/kit: each name has one home", () => {
    expect(Object.keys(kit).filter((name) => name in main)).toEqual([]);
  });

  it("leaves internals out", () => {
    for (const name of [
      "clearTokenCache",
      "parseDuration",
      "normalizePhrase",
      "summaryRequestBody",
      "DUTCH_PHRASES",
      "LocalLeases",
      "completeStore",
    ]) {
      expect(main, name).not.toHaveProperty(name);
    }
  });
});

describe("threadkeep/kit", () => {
  it("is a subpath of the package, built from src/stores/kit.ts", () => {
    expect(pkg.exports["./kit"]).toEqual({ types: "./dist/stores/kit.d.ts", import: "./dist/stores/kit.js" });
  });

  it("holds the store-author tools", () => {
    for (const name of [
      "LocalLeases",
      "applyMessageQuery",
      "completeStore",
      "hasBranches",
      "planHistoryWrite",
      "rankByRelevanceInSlices",
    ]) {
      expect(typeof (kit as Record<string, unknown>)[name], name).toBe("function");
    }
  });

  it("with threadkeep, is all the third-party store fixtures import", () => {
    for (const fixture of ["../fixtures/minimal-store.ts", "../stores/_kv-store.ts"]) {
      expect(new Set(importsOf(fixture)), fixture).toEqual(new Set(["../../src/index.js", "../../src/stores/kit.js"]));
    }
  });
});
