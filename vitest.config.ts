import { availableParallelism } from "node:os";
import { configDefaults, defineConfig } from "vitest/config";

/**
 * A test file's name decides its project (DEVELOPERS.md, "Tests"); test/package/test-projects.test.ts
 * fails when a file in a quick project needs a service, a child process or a browser, or mocks modules.
 */
const TESTS = ["{src,test}/**/*.test.ts"];
/** `x.service.test.ts`: starts a browser or a child process, or needs PostgreSQL or Redis. */
const SERVICE_TESTS = ["{src,test}/**/*.service.test.ts"];
/** `x.mock.test.ts`: in-process, but mocks modules, so it needs a module graph of its own. */
const MOCKING_TESTS = ["{src,test}/**/*.mock.test.ts"];

/**
 * `npm test` runs every project, as CI does; `npm run test:quick` the two `quick` ones: unit and
 * in-process tests, no PostgreSQL, Redis, browser or child process.
 */
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Store suites share real PostgreSQL/Redis servers; files run in parallel but ids are random.
    pool: "forks",
    // Most files wait on servers, child processes and the database more than they compute, so one
    // file more than there are cores keeps the cores busy (vitest's default, one fewer than the cores,
    // runs a file at a time on two). `--maxWorkers=N` or VITEST_MAX_WORKERS overrides it.
    maxWorkers: Math.max(2, availableParallelism() + 1),
    reporters: ["default", "./test/_summary-reporter.ts"],
    // Fails a file that leaves console mocked, fake timers on or process.env changed (files share workers).
    runner: "./test/_runner.ts",
    projects: [
      {
        extends: true,
        test: {
          name: "quick",
          include: TESTS,
          exclude: [...configDefaults.exclude, ...SERVICE_TESTS, ...MOCKING_TESTS],
          // A worker imports the code once for all its files instead of once per file (most of these
          // files' CPU otherwise). Their tests use random ids and close what they open.
          isolate: false,
        },
      },
      { extends: true, test: { name: "quick-mocks", include: MOCKING_TESTS } },
      {
        extends: true,
        test: {
          name: "services",
          include: SERVICE_TESTS,
          // As `quick`: a worker imports the code once for its files. The suite is CPU-bound on two
          // cores (idle under 10% of a run), and importing anew for each of these files cost ~40 s of
          // its 270–295 s (2026-12-07: 230 and 250 s shared, 269 and 293 s isolated, runs alternated;
          // the test processes' CPU 365–398 → 289–319 s). What stays per file: their servers, stores,
          // child processes and browsers, closed in their own hooks; spies are restored where taken.
          isolate: false,
        },
      },
    ],
  },
});
