/** The program loads only the command it runs, and its listing matches the loaded commands. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { COMMAND_SUMMARIES } from "../../src/cli/_commands.js";
import { buildProgram } from "../../src/cli/index.js";
import { runCli } from "../cli/_run.js";

const FILES = [...new Set(COMMAND_SUMMARIES.map((c) => c.file))];

/** Replaces every command file with one that records its loading and registers the real command. */
async function recordLoads(): Promise<string[]> {
  const loaded: string[] = [];
  for (const file of FILES) {
    const path = `../../src/cli/${file.replace(/\.js$/, ".ts")}`;
    const real = await vi.importActual<{ register: (program: unknown) => void }>(path);
    vi.doMock(path, () => {
      loaded.push(file);
      return real;
    });
  }
  return loaded;
}

afterEach(() => {
  for (const file of FILES) vi.doUnmock(`../../src/cli/${file.replace(/\.js$/, ".ts")}`);
  vi.resetModules();
});

describe("threadkeep loads only the command it runs", () => {
  it("lists every command as the loaded commands do, without loading any", async () => {
    const loaded = await recordLoads();
    const { buildProgram: build } = await import("../../src/cli/index.js");
    const listed = (await build({ argv: ["node", "threadkeep", "--help"] })).helpInformation();
    expect(loaded).toEqual([]);
    const full = (await buildProgram({ loadAll: true })).helpInformation();
    expect(listed).toBe(full);
    for (const { term } of COMMAND_SUMMARIES) expect(listed).toContain(term);
  });

  it("loads the one file of the command named, also for `help <command>`", async () => {
    const loaded = await recordLoads();
    const { buildProgram: build } = await import("../../src/cli/index.js");
    const serve = await build({ argv: ["node", "threadkeep", "serve", "--help"] });
    expect(serve.commands.map((c) => c.name())).toEqual(["serve"]);
    await build({ argv: ["node", "threadkeep", "help", "import"] });
    expect(loaded).toEqual(["./serve.js", "./export-import.js"]);
  });

  it("still lists a command's options in its own help", async () => {
    const run = await runCli("import", "--help");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("Usage: threadkeep import [options] <file>");
    expect(run.stdout).toContain("--strict");
  });

  it("suggests the command meant by a typo", async () => {
    const run = await runCli("sessoins");
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("unknown command 'sessoins'");
    expect(run.stderr).toContain("Did you mean sessions?");
  });
});
