/**
 * A test file's name decides its vitest project (vitest.config.ts): `x.service.test.ts` runs in
 * `services`, `x.mock.test.ts` in `quick-mocks`, any other `x.test.ts` under src/ or test/ in `quick`,
 * where files share one module graph and nothing may start a process or reach a server. This test holds
 * the quick projects to that: no file in them (nor a test helper it imports, at any depth) imports
 * test/_services.ts, a child process, a browser or a PostgreSQL or Redis client; and no file in `quick`
 * mocks modules.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const work = mkdtempSync(join(tmpdir(), "tk-projects-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** What makes a file a service test: a child process (which the cluster, standby, nginx and serve helpers start), a browser, a server's client. */
const SERVICE_PACKAGES = new Set([
  "node:child_process",
  "child_process",
  "playwright-core",
  "postgres",
  "redis",
  "@modelcontextprotocol/sdk/client/stdio.js",
]);
const MOCKS_MODULES = /\bvi\.(mock|doMock|unmock|doUnmock)\(/;

type Project = "quick" | "quick-mocks" | "services";

/** The rule vitest.config.ts applies with its globs. */
function projectOf(file: string): Project {
  if (file.endsWith(".service.test.ts")) return "services";
  if (file.endsWith(".mock.test.ts")) return "quick-mocks";
  return "quick";
}

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" || entry.name === "fixtures" ? [] : testFiles(path);
    return entry.name.endsWith(".test.ts") ? [path] : [];
  });
}

const options = { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext };

/**
 * The first way `file` (in the repository at `root`) reaches what marks a service test, as a chain of
 * imports (`test/cli/x.test.ts -> test/cli/_stores.ts -> test/_services.ts`), or undefined. Follows the
 * helpers of test/ and bench/ (every form of import), not src/: the code under test is not the test's service.
 */
function serviceChain(file: string, root = ROOT, seen = new Set<string>()): string[] | undefined {
  if (seen.has(file)) return undefined;
  seen.add(file);
  const name = relative(root, file);
  if (file === join(root, "test/_services.ts")) return [name];
  const text = readFileSync(file, "utf8");
  for (const { fileName: spec } of ts.preProcessFile(text, true, true).importedFiles) {
    if (!spec.startsWith(".")) {
      if (SERVICE_PACKAGES.has(spec)) return [name, spec];
      continue;
    }
    const target = ts.resolveModuleName(spec, file, options, ts.sys).resolvedModule?.resolvedFileName;
    if (!target || target.startsWith(join(root, "src") + "/") || target.includes("/node_modules/")) continue;
    const chain = serviceChain(target, root, seen);
    if (chain) return [name, ...chain];
  }
  return undefined;
}

const files = [...testFiles(join(ROOT, "src")), ...testFiles(join(ROOT, "test"))].sort();

describe("the test projects", () => {
  it("find the test files", () => {
    const count = (project: Project) => files.filter((file) => projectOf(file) === project).length;
    expect(count("quick")).toBeGreaterThan(100);
    expect(count("services")).toBeGreaterThan(40);
    expect(count("quick-mocks")).toBeGreaterThan(0);
  });

  it("quick and quick-mocks hold no file that needs a service, a child process or a browser (rename it x.service.test.ts)", () => {
    const missorted = files
      .filter((file) => projectOf(file) !== "services")
      .flatMap((file) => {
        const chain = serviceChain(file);
        return chain ? [chain.join(" -> ")] : [];
      });
    expect(missorted).toEqual([]);
  });

  it("quick holds no file that mocks modules (rename it x.mock.test.ts)", () => {
    const mocking = files.filter(
      (file) => projectOf(file) === "quick" && MOCKS_MODULES.test(readFileSync(file, "utf8")),
    );
    expect(mocking.map((file) => relative(ROOT, file))).toEqual([]);
  });

  it("are told a service file through a helper at any depth, an import() and a type-only import", () => {
    const tree: Record<string, string> = {
      "test/_services.ts": "export const URL = 1;\n",
      "test/a/_stores.ts": 'export { URL } from "../_services.js";\n',
      "test/a/_kinds.ts": 'export * from "./_stores.js";\n',
      "test/a/deep.test.ts": 'import { URL } from "./_kinds.js";\nexport const u = URL;\n',
      "test/a/spawns.test.ts": 'export const run = () => import("node:child_process");\n',
      "test/a/browses.test.ts": 'import type { Browser } from "playwright-core";\nexport type B = Browser;\n',
      "test/a/plain.test.ts":
        'import { readFileSync } from "node:fs";\nimport { x } from "../../src/x.js";\nexport const y = [readFileSync, x];\n',
      "src/x.ts": 'import postgres from "postgres";\nexport const x = postgres;\n',
    };
    for (const [path, text] of Object.entries(tree)) {
      mkdirSync(dirname(join(work, path)), { recursive: true });
      writeFileSync(join(work, path), text);
    }
    const chains = testFiles(join(work, "test")).map(
      (file) => serviceChain(file, work)?.join(" -> ") ?? relative(work, file),
    );
    expect(chains.sort()).toEqual([
      "test/a/browses.test.ts -> playwright-core",
      "test/a/deep.test.ts -> test/a/_kinds.ts -> test/a/_stores.ts -> test/_services.ts",
      "test/a/plain.test.ts",
      "test/a/spawns.test.ts -> node:child_process",
    ]);
  });
});
