import { describe, expect, it } from "vitest";
import { createPostgresStore } from "./index.js";

// The keeper's behaviour on a real server: test/stores/postgres-turn-plans.service.test.ts.
describe("the PostgreSQL store's statistics interval", () => {
  // Strings, true and null come from plain JavaScript or a configuration parsed without a schema.
  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31, "100", true, null])(
    "refuses %s before connecting",
    (statisticsIntervalMs) => {
      expect(() =>
        createPostgresStore({
          url: "postgres://u@127.0.0.1:1/db",
          statisticsIntervalMs: statisticsIntervalMs as unknown as number,
        }),
      ).toThrow(
        expect.objectContaining({ code: "invalid_request", message: expect.stringContaining("statisticsIntervalMs") }),
      );
    },
  );

  it.each([false as const, 1, 60_000, 2 ** 31 - 1])("takes %s", (statisticsIntervalMs) => {
    expect(() => createPostgresStore({ url: "postgres://u@127.0.0.1:1/db", statisticsIntervalMs })).not.toThrow();
  });
});
