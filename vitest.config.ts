import { availableParallelism } from "node:os";
import { configDefaults, defineConfig } from "vitest/config";

/** Unit tests beside the code, and the tests in test/ (one folder level: a new folder is a service's until sorted). */
const IN_PROCESS = ["src/**/*.test.ts", "test/{adapters,bench,cli,context,recall,server,stores}/*.test.ts"];

/** The test files that start a browser or a child process, or need PostgreSQL or Redis. */
const SERVICE_TESTS = [
  "test/package/*.test.ts",
  "test/cli/{bin,closed-pipe,migrate}.test.ts",
  "test/server/{end-users,failover,in-place-edits,inspector,inspector-memories,inspector-screenshots,lease-refused,mcp,outage,oversized-body,postgres-disk-full,postgres-recall-round-trips,postgres-turn-round-trips,redis-maxmemory,redis-round-trips,serve,storage-full,user-export,workers}.test.ts",
  "test/adapters/*-contract.test.ts",
  "test/stores/{postgres,redis,url}*.test.ts",
  "test/stores/{sqlite,sqlite-open-turn-quarantine-under-lock,backups}.test.ts",
];

/** In-process files that mock modules, so they need a module graph of their own. */
const MOCKING_TESTS = ["test/cli/lazy-commands.test.ts", "test/stores/sqlite-checkpoint-{fallback,worker-lost}.test.ts"];

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
    projects: [
      {
        extends: true,
        test: {
          name: "quick",
          include: IN_PROCESS,
          exclude: [...configDefaults.exclude, ...SERVICE_TESTS, ...MOCKING_TESTS],
          // A worker imports the code once for all its files instead of once per file (most of these
          // files' CPU otherwise). Their tests use random ids and close what they open.
          isolate: false,
        },
      },
      { extends: true, test: { name: "quick-mocks", include: MOCKING_TESTS } },
      // Everything else in test/: the service files, and any file in a folder the quick ones do not name.
      {
        extends: true,
        test: {
          name: "services",
          include: [...SERVICE_TESTS, "test/*.test.ts", "test/!(adapters|bench|cli|context|recall|server|stores)/**/*.test.ts", "test/*/*/**/*.test.ts"],
        },
      },
    ],
  },
});
