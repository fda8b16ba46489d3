/** `threadkeep memories …` and `threadkeep users erase` as the CLI runs them, in-process, over a SQLite file. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { runCli } from "./_run.js";

const dir = mkdtempSync(join(tmpdir(), "tk-cli-memories-"));
const url = `sqlite:${join(dir, "m.db")}`;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("threadkeep memories", () => {
  it("adds, lists (newest first, or by --query), edits and deletes one user's memories", async () => {
    const added = await runCli("memories", "add", "is vegetarian", "--user", "alice", "--json", "--store", url);
    expect(added).toMatchObject({ code: 0, stderr: "" });
    const id = JSON.parse(added.stdout).id as string;
    await runCli("memories", "add", "manager is Sam", "--user", "alice", "--store", url);
    const list = await runCli("memories", "list", "--user", "alice", "--json", "--store", url);
    expect(JSON.parse(list.stdout).memories.map((m: { text: string }) => m.text)).toEqual([
      "manager is Sam",
      "is vegetarian",
    ]);
    const ranked = await runCli("memories", "list", "--user", "alice", "--query", "vegetarian", "--store", url);
    expect(ranked.stdout).toMatch(new RegExp(`^${id}  \\S+  is vegetarian\\n$`));
    expect((await runCli("memories", "list", "--user", "bob", "--store", url)).stdout).toBe("no memories\n");

    const edited = await runCli("memories", "edit", id, "is vegan", "--user", "alice", "--json", "--store", url);
    expect(JSON.parse(edited.stdout)).toMatchObject({
      text: "is vegan",
      history: [{ text: "is vegetarian", reason: "edit" }],
    });
    // Another user's id is not found, for an edit as for a delete.
    for (const args of [
      ["edit", id, "x"],
      ["delete", id],
    ]) {
      const run = await runCli("memories", ...args, "--user", "bob", "--store", url);
      expect(run.code).not.toBe(0);
      expect(run.stderr).toMatch(/not found/);
    }
    expect(await runCli("memories", "delete", id, "--user", "alice", "--store", url)).toMatchObject({
      code: 0,
      stdout: `deleted ${id}\n`,
    });
    const empty = await runCli("memories", "add", "   ", "--user", "alice", "--store", url);
    expect(empty.code).not.toBe(0);
    expect(empty.stderr).toMatch(/text must not be empty/);
  });
});

describe("threadkeep users erase", () => {
  it("erases a user's sessions and memories, and nobody else's", async () => {
    const store = createSqliteStore({ path: join(dir, "m.db") });
    for (const userId of ["carol", "carol", "dave"]) {
      const id = newSessionId();
      await store.createSession({ id, userId });
      await store.appendMessages(id, [{ role: "user", content: "hi" }]);
      await store.addUserMemory({ userId, text: `${userId} fact` });
    }
    await store.close();
    const run = await runCli("users", "erase", "carol", "--store", url);
    expect(run).toMatchObject({ code: 0, stdout: "erased carol: 2 sessions, 2 memories\n", stderr: "" });
    const after = createSqliteStore({ path: join(dir, "m.db") });
    expect((await after.listSessions("carol")).sessions).toEqual([]);
    expect((await after.listUserMemories("carol")).memories).toEqual([]);
    expect((await after.listSessions("dave")).sessions).toHaveLength(1);
    expect((await after.listUserMemories("dave")).memories).toHaveLength(1);
    await after.close();
  });
});
