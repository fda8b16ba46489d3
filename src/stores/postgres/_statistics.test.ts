import { describe, expect, it } from "vitest";
import { createPostgresStore } from "./index.js";

// The keeper's behaviour on a real server: test/stores/postgres-turn-plans.service.test.ts.
describe("the PostgreSQL store's statistics interval", () => {
  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31])(
    "refuses %s before connecting",
    (statisticsIntervalMs) => {
      expect(() => createPostgresStore({ url: "postgres://u@127.0.0.1:1/db", statisticsIntervalMs })).toThrow(
        expect.objectContaining({ code: "invalid_request", message: expect.stringContaining("statisticsIntervalMs") }),
      );
    },
  );

  it.each([false as const, 1, 60_000, 2 ** 31 - 1])("takes %s", (statisticsIntervalMs) => {
    expect(() => createPostgresStore({ url: "postgres://u@127.0.0.1:1/db", statisticsIntervalMs })).not.toThrow();
  });
});
