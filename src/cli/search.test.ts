import { readFileSync } from "node:fs";
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { AUTO_MODE_HELP, register } from "./search.js";

describe("threadkeep search --mode auto", () => {
  it("is described in --help as docs/cli.md describes it: relevance ranking, not every word newest first", () => {
    const program = new Command("threadkeep");
    register(program);
    const help = program.commands
      .find((c) => c.name() === "search")!
      .helpInformation()
      .replace(/\s+/g, " ");
    expect(help).toContain(AUTO_MODE_HELP);
    const cliDoc = readFileSync(new URL("../../docs/cli.md", import.meta.url), "utf8").replace(/\s+/g, " ");
    expect(cliDoc).toContain(AUTO_MODE_HELP);
    expect(AUTO_MODE_HELP).toMatch(/relevance/);
  });
});
