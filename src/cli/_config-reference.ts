/**
 * The generated part of docs/configuration.md: the table of `serve`'s settings between two marker
 * comments, built from the command's definitions (scripts/config-reference.ts writes it).
 */
import { Command } from "commander";
import { settingsTable } from "./_config-file.js";
import { register } from "./serve.js";

/** The comments around the generated table. */
export const REFERENCE_MARKERS = ["<!-- generated: npm run docs:config -->", "<!-- end generated -->"] as const;

/** The `serve` command as the CLI defines it, not run. */
export function serveCommand(): Command {
  const program = new Command("threadkeep");
  register(program);
  return program.commands.find((c) => c.name() === "serve")!;
}

/** `page` with the table between its markers rebuilt from the definitions. @throws Error without both markers. */
export function renderReference(page: string): string {
  const [open, close] = REFERENCE_MARKERS;
  const start = page.indexOf(open);
  const end = page.indexOf(close);
  if (start < 0 || end < start) throw new Error(`the page needs the markers ${open} and ${close}`);
  return `${page.slice(0, start + open.length)}\n${settingsTable(serveCommand())}\n${page.slice(end)}`;
}
