#!/usr/bin/env node
/* global console, process */
// Checks that src/ holds its layers: imports only point down (RANKS below), no module imports itself
// round a circle, an underscored file (`_x.ts`) is imported only from its own folder (and the folders
// below it), a test in test/ or a bench uses src/'s underscored files only from test/internals/ (and
// nothing outside test/internals/ imports from there), and a migration
// (`<backend>/migrations/NNN-<what>.ts`) never imports its store (`<backend>/index.ts`). Every relative
// import counts: static, `import type`, `export … from`, `import()` and `import("…").T`.
// `checkLayers(src)` returns the problems; run as a script it prints them and exits 1, or prints nothing
// and exits 0 when the layers hold. `node scripts/check-layers.mjs [dir]` checks another tree laid out
// like src/ (with test/ and bench/ beside it); the checker's own test calls `checkLayers(dir)`.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

// Lowest first; a unit imports only from itself and from lower ranks, never from a peer.
// `create-memory.ts` opens a store URL for core; `index.ts` (the package entry) and `testing/` (the
// published conformance suite) sit beside server and adapters.
const RANKS = [
  ["core"],
  ["stores", "llm"],
  ["transfer", "create-memory.ts"],
  ["server", "adapters", "testing", "index.ts"],
  ["cli"],
];
const rankOf = new Map(RANKS.flatMap((units, rank) => units.map((unit) => [unit, rank])));

const isTest = (file) => file.endsWith(".test.ts");
/** Whether `file` lies in `dir` or a folder below it. */
const isUnder = (file, dir) => file.startsWith(dir + "/");

function sourceFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

/**
 * The module specifiers a file names, in every form that makes it depend on another module. TypeScript's
 * import scanner finds them all (static, type-only, re-exports, import() calls and types, import =
 * require) without parsing the whole file: a third of the time of a full parse of src/.
 */
function specifiers(file) {
  return ts.preProcessFile(readFileSync(file, "utf8"), true, true).importedFiles.map((f) => f.fileName);
}

const options = { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, allowJs: false };
const resolveImport = (spec, file) =>
  ts.resolveModuleName(spec, file, options, ts.sys).resolvedModule?.resolvedFileName;

/** The problems of the tree at `srcDir` (and of test/ and bench/ beside it), one line each; none when it holds. */
export function checkLayers(srcDir) {
  const SRC = resolve(srcDir);
  if (!existsSync(SRC)) throw new Error(`check-layers: no folder at ${SRC}`);
  // Files are named from the folder that holds the tree: `src/core/x.ts`.
  const ROOT = dirname(SRC);
  const INTERNALS = join(ROOT, "test", "internals");
  const unitOf = (file) => relative(SRC, file).split("/")[0];
  const files = sourceFiles(SRC).sort();
  const problems = [];
  const graph = new Map(files.map((file) => [file, new Set()]));

  for (const file of files) {
    for (const spec of new Set(specifiers(file))) {
      if (!spec.startsWith(".")) continue;
      const target = resolveImport(spec, file);
      const name = relative(ROOT, file);
      // A test beside the code may use the shared helpers of test/ and bench/.
      if (isTest(file) && target && !target.startsWith(SRC + "/")) continue;
      if (!target || !graph.has(target)) {
        problems.push(`${name}: cannot resolve "${spec}" to a file under src/`);
        continue;
      }
      graph.get(file).add(target);
      // A schema version is frozen when released: it may use what the store shares, never the store itself.
      if (basename(dirname(file)) === "migrations" && target === join(dirname(dirname(file)), "index.ts")) {
        problems.push(`${name}: imports "${spec}" (${relative(ROOT, target)}): a migration may not import its store`);
      }
      // Private to its folder: a file beside it or below it may use it, a test beside the code included.
      if (basename(target).startsWith("_") && !isUnder(file, dirname(target))) {
        problems.push(
          `${name}: imports "${spec}" (${relative(ROOT, target)}): an underscored file is private to ${relative(ROOT, dirname(target))}/`,
        );
      }
      const [from, to] = [unitOf(file), unitOf(target)];
      // A test beside the code is a consumer of its layer, not part of it.
      if (from === to || isTest(file)) continue;
      const [fromRank, toRank] = [rankOf.get(from), rankOf.get(to)];
      if (fromRank === undefined)
        problems.push(`${name}: src/${from} has no place in the layer table of scripts/check-layers.mjs`);
      else if (toRank === undefined || toRank >= fromRank) {
        problems.push(`${name}: imports "${spec}" (${relative(ROOT, target)}): ${from} may not import from ${to}`);
      }
    }
  }

  // Tarjan's strongly connected components; each component with more than one file holds a circle.
  let counter = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const components = [];
  function connect(file) {
    index.set(file, counter);
    low.set(file, counter++);
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file)) {
      if (!index.has(next)) {
        connect(next);
        low.set(file, Math.min(low.get(file), low.get(next)));
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file), index.get(next)));
    }
    if (low.get(file) !== index.get(file)) return;
    const component = [];
    let member;
    do {
      member = stack.pop();
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || graph.get(file).has(file)) components.push(component);
  }
  for (const file of files) if (!index.has(file)) connect(file);

  /** The shortest way from a file back to itself inside its component (breadth first). */
  function shortestCycle(start, members) {
    const previous = new Map([[start, null]]);
    const queue = [start];
    while (queue.length > 0) {
      const file = queue.shift();
      for (const next of graph.get(file)) {
        if (!members.has(next)) continue;
        if (next === start) {
          const path = [file];
          while (previous.get(path[0])) path.unshift(previous.get(path[0]));
          return [...path, start];
        }
        if (!previous.has(next)) {
          previous.set(next, file);
          queue.push(next);
        }
      }
    }
    return [start];
  }

  for (const component of components) {
    const members = new Set(component);
    const cycle = shortestCycle(component.sort()[0], members);
    const names = component.map((file) => relative(ROOT, file));
    problems.push(
      `import circle of ${component.length} files (${names.join(", ")}): ${cycle.map((file) => relative(ROOT, file)).join(" -> ")}`,
    );
  }

  // Tests and benches use src/ as a user does; a test of an internal lives in test/internals/, and what is
  // there stays there.
  for (const file of [...sourceFiles(join(ROOT, "test")), ...sourceFiles(join(ROOT, "bench"))].sort()) {
    const name = relative(ROOT, file);
    if (isUnder(file, INTERNALS)) continue;
    for (const spec of new Set(specifiers(file))) {
      if (!spec.startsWith(".")) continue;
      const target = resolveImport(spec, file);
      if (!target) continue;
      if (isUnder(target, SRC) && basename(target).startsWith("_")) {
        problems.push(
          `${name}: imports "${spec}" (${relative(ROOT, target)}): an underscored file of src/ is used only from test/internals/`,
        );
      } else if (isUnder(target, INTERNALS)) {
        problems.push(
          `${name}: imports "${spec}" (${relative(ROOT, target)}): test/internals/ is used only from test/internals/`,
        );
      }
    }
  }

  return [...new Set(problems)];
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const problems = checkLayers(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), "..", "src"));
  if (problems.length > 0) {
    for (const problem of problems) console.error(problem);
    console.error(`check-layers: ${problems.length} problem(s)`);
    process.exit(1);
  }
}
