import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Store suites share real PostgreSQL/Redis servers; files run in parallel but ids are random.
    pool: "forks",
    reporters: ["default", "./test/_summary-reporter.ts"],
  },
});
