/**
 * docs/cli.md's command table lists every command `threadkeep --help` lists, and no other: a
 * command added to the CLI without a line in the table (or one removed) fails here.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { buildProgram } from "../../src/cli/index.js";

describe("docs/cli.md command table", () => {
  it("names the commands of threadkeep --help", async () => {
    const program = await buildProgram({ argv: ["node", "threadkeep", "--help"] });
    const listed = program.commands.map((c) => c.name()).sort();
    const doc = readFileSync(new URL("../../docs/cli.md", import.meta.url), "utf8");
    // The first table of the page: its rows name commands as `threadkeep x …` or `threadkeep x` / `y`.
    const table = doc.slice(doc.indexOf("| command |"), doc.indexOf("\n\n", doc.indexOf("| command |")));
    const documented = [...table.matchAll(/`threadkeep (\w+)[^`]*`(?: \/ `(\w+)`)?/g)]
      .flatMap((m) => (m[2] ? [m[1], m[2]] : [m[1]]))
      .sort();
    expect(documented).toEqual(listed);
  });
});
