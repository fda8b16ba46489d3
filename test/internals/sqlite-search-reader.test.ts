/**
 * The SQLite store's search thread (`sqlite/_search-reader.ts`) on its own: a thread that cannot open
 * the file answers nothing (the store then searches on its own thread) and warns once; and the
 * searchable text its connection computes for the substring search is the store's.
 */
import { describe, expect, it, vi } from "vitest";
import { createSearchReader, WORKER_SEARCH_TEXT } from "../../src/stores/sqlite/_search-reader.js";
import { searchTextOf } from "../../src/stores/sqlite/_search-statements.js";
import { sqliteTempFiles } from "../stores/_sqlite-files.js";

const { freshPath } = sqliteTempFiles("threadkeep-sqlite-search-reader-");

describe("the sqlite search thread", () => {
  it("answers nothing when the thread cannot open the file, once warned, and the caller searches itself", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const reader = createSearchReader({ path: `${freshPath()}-missing`, busyTimeoutMs: 100 });
    try {
      expect(await reader.rows("searchSubstring", ["u", 0, 0, "x", 0, 1, 10])).toBeUndefined();
      expect(await reader.rows("searchSubstring", ["u", 0, 0, "x", 0, 1, 10])).toBeUndefined();
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0][0])).toMatch(/search thread stopped/);
    } finally {
      await reader.close();
      warn.mockRestore();
    }
  });

  it("the thread's searchable text is the store's", () => {
    const workerText = (0, eval)(WORKER_SEARCH_TEXT) as (body: unknown) => string;
    const bodies = [
      JSON.stringify({ role: "user", content: "Hello THERE" }),
      JSON.stringify({
        role: "user",
        content: [{ type: "text", text: "Part ONE" }, { type: "image_url" }, { type: "text", text: "two" }],
      }),
      JSON.stringify({ role: "assistant", content: null, tool_calls: [] }),
      JSON.stringify({ role: "user", content: [null] }),
      JSON.stringify({ role: "user", content: { text: "not a list" } }),
      JSON.stringify("a string body"),
      "null",
      "not json",
      "",
    ];
    for (const body of bodies) expect(workerText(body), body).toBe(searchTextOf(body));
    expect(workerText(42)).toBe("");
  });
});
