/** `threadkeep search` as the CLI runs it, in-process, over a SQLite file. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";
import { newSessionId } from "../../src/core/ids.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { runCli } from "./_run.js";

const dir = mkdtempSync(join(tmpdir(), "tk-cli-search-"));
const url = `sqlite:${join(dir, "s.db")}`;
const alice = newSessionId();
let fake: FakeUpstream;

beforeAll(async () => {
  fake = await startFakeUpstream();
  const store = createSqliteStore({ path: join(dir, "s.db") });
  for (const [id, userId, content] of [
    [alice, "alice", "Remember to buy groceries on Friday"],
    [newSessionId(), "bob", "bob's grocery list"],
  ]) {
    await store.createSession({ id, userId });
    await store.appendMessages(id, [{ role: "user", content }]);
  }
  await store.close();
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("threadkeep search", () => {
  it("finds one owner's messages with stemming, as text or JSON", async () => {
    const run = await runCli("search", "grocery", "--user", "alice", "--store", url);
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(run.stdout).toBe(`${alice} #1  Remember to buy groceries on Friday\n`);
    const json = await runCli("search", "grocery", "--user", "alice", "--json", "--mode", "fulltext", "--store", url);
    expect(JSON.parse(json.stdout).map((h: { sessionId: string }) => h.sessionId)).toEqual([alice]);
    expect((await runCli("search", "grocery", "--user", "carol", "--store", url)).stdout).toBe("no matches\n");
  });

  it("refuses an unknown mode as a usage error", async () => {
    const run = await runCli("search", "x", "--mode", "psychic", "--store", url);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--mode must be one of/);
  });

  it("reindex embeds stored messages, after which semantic search finds them by meaning", async () => {
    const flags = ["--embedding-model", "fake-embed", "--embedding-url", fake.url, "--store", url];
    const semantic = ["search", "supermarket", "--user", "alice", "--mode", "semantic", ...flags];
    expect((await runCli(...semantic)).stdout).toBe("no matches\n");
    const run = await runCli("reindex", ...flags);
    expect(run).toMatchObject({ code: 0 });
    expect(run.stdout).toMatch(/^embedded 2 message\(s\) in 2 session\(s\) with fake-embed in /);
    expect(run.stderr).toMatch(/reindex/);
    const found = await runCli(...semantic);
    expect(found.stdout).toMatch(new RegExp(`^${alice} #1 0\\.\\d{3}  Remember to buy groceries on Friday\n$`));
    expect((await runCli("reindex", ...flags)).stdout).toMatch(/^embedded 0 message/);
    expect((await runCli("reindex", "--store", url)).code).toBe(2);
  });
});
