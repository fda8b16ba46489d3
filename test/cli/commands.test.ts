/** The export, import, migrate and help commands as the CLI runs them, in-process. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { runCli } from "./_run.js";
import { seedVaried } from "./_seed.js";

const dir = mkdtempSync(join(tmpdir(), "tk-cli-commands-"));
const source = `sqlite:${join(dir, "src.db")}`;

beforeAll(async () => {
  const store = createSqliteStore({ path: join(dir, "src.db") });
  await seedVaried(store);
  await store.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("threadkeep export / import", () => {
  it("exports to a file and imports it elsewhere; a second import changes nothing", async () => {
    const file = join(dir, "all.jsonl");
    expect(await runCli("export", "--all", "-o", file, "--store", source)).toEqual({
      code: 0,
      stdout: "",
      stderr: `exported 4 sessions, 17 messages, 0 memories to ${file}\n`,
    });
    const target = `sqlite:${join(dir, "target.db")}`;
    const first = await runCli("import", file, "--store", target);
    expect(first).toMatchObject({
      code: 0,
      stdout:
        "imported 4 sessions (4 new, 0 completed, 0 updated), 17 messages; 0 already present; 0 memories (0 already present)\n",
    });
    const second = await runCli("import", file, "--store", target);
    expect(second.stdout).toBe(
      "imported 0 sessions (0 new, 0 completed, 0 updated), 0 messages; 4 already present; 0 memories (0 already present)\n",
    );
    const again = await runCli("export", "--store", target);
    expect(again.stdout).toBe(readFileSync(file, "utf8"));
  });

  it("exports one owner or one session to standard output, and refuses two selections", async () => {
    const bob = (await runCli("export", "--user", "bob", "--store", source)).stdout.trimEnd().split("\n");
    expect(bob.filter((l) => l.startsWith('{"type":"session"'))).toHaveLength(2);
    const id = JSON.parse(bob[1]).session.id;
    const one = await runCli("export", "--session", id, "--store", source);
    expect(one.stdout.trimEnd().split("\n")[1]).toBe(bob[1]);
    expect(await runCli("export", "--session", id, "--all", "--store", source)).toMatchObject({
      code: 2,
      stderr: "threadkeep: Choose one of --session, --user and --all\n",
    });
  });

  it("reports a malformed line with its number; --strict imports nothing", async () => {
    const file = join(dir, "broken.jsonl");
    const lines = readFileSync(join(dir, "all.jsonl"), "utf8").trimEnd().split("\n");
    const firstMessage = lines.findIndex((l) => l.startsWith('{"type":"message"'));
    lines[firstMessage] = "{oops";
    writeFileSync(file, `${lines.join("\n")}\n`);
    const strict = await runCli("import", file, "--strict", "--store", `sqlite:${join(dir, "strict.db")}`);
    expect(strict.code).toBe(1);
    expect(strict.stderr).toMatch(
      new RegExp(
        `^${file}:${firstMessage + 1}: malformed JSON \\(.+\\)\nthreadkeep: nothing imported: 1 bad line\\(s\\) \\(--strict\\)\n$`,
      ),
    );
    expect(
      JSON.parse((await runCli("sessions", "list", "--json", "--store", `sqlite:${join(dir, "strict.db")}`)).stdout),
    ).toEqual([]);
    const lenient = await runCli("import", file, "--store", `sqlite:${join(dir, "lenient.db")}`);
    expect(lenient.code).toBe(1);
    expect(lenient.stdout).toMatch(/^imported 3 sessions \(3 new/);
  });
});

describe("bad input", () => {
  it("says so in one line for a missing file, an unwritable path and a malformed session id", async () => {
    expect(await runCli("import", join(dir, "nope.jsonl"), "--store", source)).toMatchObject({
      code: 2,
      stderr: `threadkeep: Cannot import ${join(dir, "nope.jsonl")}: no such file\n`,
    });
    const unwritable = await runCli("export", "-o", join(dir, "no", "such", "dir.jsonl"), "--store", source);
    expect(unwritable).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/^threadkeep: ENOENT: no such file or directory, open '.+dir\.jsonl'\n$/),
    });
    expect(await runCli("chat", "--session", "nope", "--store", "memory:")).toMatchObject({
      code: 2,
      stderr: 'threadkeep: Invalid session id "nope": expected a UUID or user_{uuid}_conv_{uuid}\n',
    });
  });
});

describe("threadkeep migrate", () => {
  it("prints plain progress lines off a terminal and ends with a verification count", async () => {
    const to = `file:${join(dir, "files")}`;
    const run = await runCli("migrate", "--from", source, "--to", to);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(
      /^migrate: 4\/4 sessions · 17 messages · \d+ sessions\/s, \d+ messages\/s \(100%\), ETA 0s\n$/m,
    );
    expect(run.stdout).toMatch(
      /^copied 4 sessions \(4 new, 0 completed, 0 updated; 0 already there\), 17 messages in \S+ /,
    );
    expect(run.stdout).toMatch(
      /\ncopied 0 memories \(0 already there\)\nverified: 4\/4 sessions, 17\/17 messages, 0\/0 memories in the target\n$/,
    );
    const again = await runCli("migrate", "--from", source, "--to", to);
    expect(again.stdout).toMatch(/^copied 0 sessions \(0 new, 0 completed, 0 updated; 4 already there\), 0 messages/);
  });

  it("refuses to migrate a store onto itself", async () => {
    expect(await runCli("migrate", "--from", source, "--to", `${source}`)).toMatchObject({
      code: 2,
      stderr: "threadkeep: --from and --to name the same store\n",
    });
  });
});

describe("threadkeep --help", () => {
  it("documents every command, its flags and the exit codes", async () => {
    const help = async (...args: string[]) => {
      const run = await runCli(...args, "--help");
      expect(run.code).toBe(0);
      return run.stdout;
    };
    const root = await help();
    for (const name of ["chat", "sessions", "export", "import", "migrate"])
      expect(root).toMatch(new RegExp(`^  ${name}\\b`, "m"));
    expect(root).toMatch(/Exit codes:\n {2}0 {2}ok\n {2}1 {2}failure: .+\n {2}2 {2}usage: .+/);
    const chat = await help("chat");
    for (const flag of [
      "--resume",
      "--session <id>",
      "--upstream <url>",
      "--model <name>",
      "--store <url>",
      "--window <n>",
      "/forget",
    ]) {
      expect(chat).toContain(flag);
    }
    const sessions = await help("sessions");
    for (const sub of ["list", "show", "delete", "prune"]) expect(sessions).toMatch(new RegExp(`^  ${sub}\\b`, "m"));
    expect(await help("sessions", "list")).toContain("--json");
    expect(await help("sessions", "prune")).toMatch(/--older-than <duration>[\s\S]*--dry-run/);
    expect(await help("export")).toContain("-o, --output <file>");
    expect(await help("import")).toContain("--strict");
    expect(await help("migrate")).toMatch(/--from <url>[\s\S]*--to <url>/);
  });
});
