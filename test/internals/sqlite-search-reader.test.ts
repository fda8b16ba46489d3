/**
 * The SQLite store's search thread (`sqlite/_search-reader.ts`) on its own: a thread that cannot open
 * the file answers nothing (the store then searches on its own thread) and warns once; and the
 * searchable text its connection computes for the substring search is the store's; and it serves every
 * search statement, a large answer in parts, row for row as it is in the file.
 */
import { describe, expect, it, vi } from "vitest";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { scopedMatch } from "../../src/stores/sqlite/_fulltext.js";
import { createSearchReader, WORKER_SEARCH_TEXT } from "../../src/stores/sqlite/_search-reader.js";
import { SEARCH_SQL, type SearchStatement, searchTextOf } from "../../src/stores/sqlite/_search-statements.js";
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

  it("serves every search statement, an answer of 4,500 rows in three parts, in order", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path, searchThread: false });
    const warn = vi.spyOn(console, "warn");
    const reader = createSearchReader({ path, busyTimeoutMs: 1_000 });
    try {
      await store.createSession({ id: "s", userId: "u" });
      await store.appendMessages(
        "s",
        Array.from({ length: 4_500 }, (_, i) => ({ role: "user" as const, content: `apples number ${i}` })),
      );
      // Indexed for full text by the store's own search.
      expect(await store.search({ userId: "u", text: "apples", mode: "fulltext", limit: 1 })).toHaveLength(1);
      const any = scopedMatch("apples", { userId: "u" }, true);
      const all = scopedMatch("apples", { userId: "u" });
      const inSession = scopedMatch("apples", { userId: "u", sessionId: "s" }, true);
      const low = Number.MIN_SAFE_INTEGER;
      const high = Number.MAX_SAFE_INTEGER;
      const args: Record<SearchStatement, unknown[]> = {
        searchSubstring: ["u", low, low, "apples number", low, high, 10],
        searchSubstringInSession: ["s", "u", low, low, "apples number", low, high, 10],
        searchFullText: [all, "u", low, low, low, high, 10],
        searchFullTextInSession: [
          scopedMatch("apples", { userId: "u", sessionId: "s" }),
          "s",
          "u",
          low,
          low,
          low,
          high,
          10,
        ],
        searchFullTextRanked: [any, "u", low, low, low, high, 10],
        searchFullTextAllInSession: [inSession, "s", -1, "s", 2 ** 32, "s", "u", low, low],
      };
      for (const name of Object.keys(SEARCH_SQL) as SearchStatement[]) {
        const rows = await reader.rows(name, args[name]);
        expect(rows, name).toBeDefined();
        if (name === "searchFullTextAllInSession") {
          expect(rows!.map((row) => row[0])).toEqual(Array.from({ length: 4_500 }, (_, i) => i + 1));
        } else {
          expect(rows, name).toHaveLength(10);
          // Newest first, or by relevance: every row is one of the session's, with its body.
          for (const [seq, , body, sessionId] of rows!) {
            expect(sessionId).toBe("s");
            expect(JSON.parse(body).content).toBe(`apples number ${seq - 1}`);
          }
        }
      }
      expect(warn).not.toHaveBeenCalled();
    } finally {
      await reader.close();
      await store.close();
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
