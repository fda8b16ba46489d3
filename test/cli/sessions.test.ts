import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { runCli } from "./_run.js";
import { seedVaried } from "./_seed.js";

const dir = mkdtempSync(join(tmpdir(), "tk-cli-sessions-"));
const store = `sqlite:${join(dir, "t.db")}`;
let ids: string[];

beforeAll(async () => {
  const s = createSqliteStore({ path: join(dir, "t.db") });
  ids = await seedVaried(s);
  // One session long inactive, for prune.
  await s.touchSession(ids[2], Date.now() - 10 * 86_400_000);
  await s.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("threadkeep sessions", () => {
  it("lists every session, most recent first, as tab-separated rows off a terminal", async () => {
    const run = await runCli("sessions", "list", "--store", store);
    expect(run.code).toBe(0);
    const [header, ...rows] = run.stdout.trimEnd().split("\n");
    expect(header.split("\t")).toEqual(["ID", "USER", "MESSAGES", "LAST ACTIVITY", "TITLE"]);
    expect(rows.map((r) => r.split("\t")[0])).toEqual([ids[3], ids[1], ids[0], ids[2]]);
    expect(rows[2].split("\t")).toEqual([
      ids[0],
      "alice",
      "7",
      expect.stringMatching(/ago$/),
      "Create a task: buy groceries",
    ]);
  });

  it("lists one owner's sessions as JSON", async () => {
    const run = await runCli("sessions", "list", "--user", "bob", "--json", "--store", store);
    const rows = JSON.parse(run.stdout);
    expect(rows.map((r: { id: string }) => r.id)).toEqual([ids[3], ids[2]]);
    expect(rows[0]).toMatchObject({ userId: "bob", messages: 2, title: "hello bob" });
  });

  it("shows a session with its messages in original numbering", async () => {
    const run = await runCli("sessions", "show", ids[1], "--store", store);
    expect(run.stdout).toMatch(new RegExp(`^session   ${ids[1]}\\nuser      alice`));
    expect(run.stdout).toContain("messages  8 (seq 5–12)");
    expect(run.stdout).toMatch(/#12 +assistant +turn 12 ✓ "quoted" \\ line…/);
    const asJson = JSON.parse(
      (await runCli("sessions", "show", ids[0], "--json", "--last", "2", "--store", store)).stdout,
    );
    expect(asJson.messages.map((m: { seq: number }) => m.seq)).toEqual([6, 7]);
    expect(asJson.state).toEqual({ lastTaskId: 42, pending: { action: "delete", taskId: 42 } });
  });

  it("prunes inactive sessions, first as a dry run", async () => {
    const dry = await runCli("sessions", "prune", "--older-than", "7d", "--dry-run", "--store", store);
    expect(dry.stdout).toBe(`would delete 1 session(s) inactive for more than 7d\n${ids[2]}\n`);
    const real = JSON.parse(
      (await runCli("sessions", "prune", "--older-than", "7d", "--json", "--store", store)).stdout,
    );
    expect(real).toEqual({ dryRun: false, olderThanMs: 7 * 86_400_000, sessions: [ids[2]] });
  });

  it("deletes a session, and says so when there is none", async () => {
    expect((await runCli("sessions", "delete", ids[3], "--store", store)).stdout).toBe(`deleted ${ids[3]}\n`);
    const again = await runCli("sessions", "delete", ids[3], "--store", store);
    expect(again).toMatchObject({ code: 1, stderr: `threadkeep: No session with id ${ids[3]}\n` });
  });

  it("refuses a malformed id and an unknown store scheme with exit code 2", async () => {
    const bad = await runCli("sessions", "show", "nope", "--store", store);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^threadkeep: Invalid session id "nope"/);
    const scheme = await runCli("sessions", "list", "--store", "mongodb://x");
    expect(scheme).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^threadkeep: Unknown store URL scheme "mongodb:"/),
    });
  });
});
