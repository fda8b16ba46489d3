import { Command, CommanderError } from "commander";
import { isThreadkeepError } from "../core/errors.js";

/** Exit codes of the `threadkeep` command: documented in the README. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/** One subcommand: a file under src/cli that adds itself to the program. */
export type CommandModule = { register(program: Command): void };

const COMMANDS = ["./serve.js", "./chat.js", "./sessions.js", "./export-import.js", "./migrate.js", "./search.js", "./reindex.js", "./mcp.js"];

const HELP_FOOTER = `
Settings come from flags, then THREADKEEP_* environment variables (THREADKEEP_STORE,
THREADKEEP_UPSTREAM_URL, THREADKEEP_MODEL, …), then defaults. Every command: threadkeep <command> --help.
Reference: docs/cli.md.

Exit codes:
  0  ok
  1  failure: a store or model error, a session not found, import problems, an interrupted migrate
  2  usage: an unknown command or flag, a bad value, an unknown store scheme, an invalid session id`;

/** Builds the `threadkeep` program with every subcommand. */
export async function buildProgram(): Promise<Command> {
  const program = new Command("threadkeep")
    .description("Session memory for LLM chat applications: an OpenAI-compatible memory proxy, a chat, and session tools.")
    .version(process.env.npm_package_version ?? "0.1.0")
    .showHelpAfterError("(threadkeep --help, or threadkeep <command> --help, lists the options)")
    .exitOverride()
    .addHelpText("after", HELP_FOOTER);
  // A command that cannot load (a file or a dependency missing from the install) fails the run with
  // its own error, rather than vanishing from the program.
  for (const path of COMMANDS) ((await import(path)) as CommandModule).register(program);
  return program;
}

/** Runs the CLI and returns its exit code (0 ok, 1 failure, 2 usage). */
export async function main(argv: string[] = process.argv): Promise<number> {
  try {
    const program = await buildProgram();
    await program.parseAsync(argv);
    return typeof process.exitCode === "number" ? process.exitCode : EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help shown because a subcommand was missing is a usage error (commander gives it exit code 1).
      if (error.code === "commander.helpDisplayed" || error.code === "commander.version") return EXIT.ok;
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (isThreadkeepError(error)) {
      process.stderr.write(`threadkeep: ${error.message}\n`);
      return error.status >= 400 && error.status < 500 && error.code !== "session_not_found" ? EXIT.usage : EXIT.failure;
    }
    process.stderr.write(`threadkeep: ${error instanceof Error ? error.message : String(error)}\n`);
    return EXIT.failure;
  }
}
