import { Command, CommanderError, Help } from "commander";
import { isThreadkeepError } from "../core/errors.js";
import { COMMAND_SUMMARIES, type CommandSummary } from "./_commands.js";

/** Exit codes of the `threadkeep` command: documented in the README. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/** One subcommand: a file under src/cli that adds itself to the program. */
export type CommandModule = { register(program: Command): void };

const HELP_FOOTER = `
Settings come from flags, then THREADKEEP_* environment variables (THREADKEEP_STORE,
THREADKEEP_UPSTREAM_URL, THREADKEEP_MODEL, …), then defaults. Every command: threadkeep <command> --help.
Reference: docs/cli.md.

Exit codes:
  0  ok
  1  failure: a store or model error, a session not found, import problems, an interrupted migrate
  2  usage: an unknown command or flag, a bad value, an unknown store scheme, an invalid session id`;

/** What {@link buildProgram} loads. */
export interface BuildProgramOptions {
  /** The command line (`node`, the script, then the arguments); its command is the one loaded. */
  argv?: string[];
  /** Load every command's file instead of only the one `argv` names (as the tests compare them). */
  loadAll?: boolean;
}

/** The command `argv` runs (`threadkeep help serve` runs help for serve), if it names one. */
function commandNamed(argv: string[]): CommandSummary | undefined {
  const args = argv.slice(2);
  // The program has no options of its own that take a value, so its first word is the command.
  let word = args.find((arg) => !arg.startsWith("-"));
  if (word === "help") word = args.slice(args.indexOf("help") + 1).find((arg) => !arg.startsWith("-"));
  return COMMAND_SUMMARIES.find((c) => c.name === word);
}

/**
 * Builds the `threadkeep` program. Only the file of the command that runs is loaded (a command's
 * file imports the server, the stores or an MCP SDK); without one (`threadkeep --help`, a typo), the
 * commands are listed from src/cli/_commands.ts and none is loaded. A command that cannot load (a
 * file or a dependency missing from the install) fails the run with its own error.
 */
export async function buildProgram(options: BuildProgramOptions = {}): Promise<Command> {
  const program = new Command("threadkeep")
    .description(
      "Session memory for LLM chat applications: an OpenAI-compatible memory proxy, a chat, and session tools.",
    )
    .version(process.env.npm_package_version ?? "0.1.0")
    .showHelpAfterError("(threadkeep --help, or threadkeep <command> --help, lists the options)")
    .exitOverride()
    .addHelpText("after", HELP_FOOTER);
  const wanted = options.loadAll ? undefined : commandNamed(options.argv ?? process.argv);
  if (options.loadAll || wanted) {
    const files = options.loadAll ? COMMAND_SUMMARIES.map((c) => c.file) : [wanted!.file];
    for (const file of new Set(files)) ((await import(file)) as CommandModule).register(program);
    return program;
  }
  // Listed, not loaded: the help shows each command as its table entry writes it.
  for (const summary of COMMAND_SUMMARIES) program.command(summary.name).description(summary.description);
  const terms = new Map(COMMAND_SUMMARIES.map((c) => [c.name, c.term]));
  const help = new Help();
  program.configureHelp({ subcommandTerm: (command) => terms.get(command.name()) ?? help.subcommandTerm(command) });
  return program;
}

/** Runs the CLI and returns its exit code (0 ok, 1 failure, 2 usage). */
export async function main(argv: string[] = process.argv): Promise<number> {
  try {
    const program = await buildProgram({ argv });
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
      return error.status >= 400 && error.status < 500 && error.code !== "session_not_found"
        ? EXIT.usage
        : EXIT.failure;
    }
    process.stderr.write(`threadkeep: ${error instanceof Error ? error.message : String(error)}\n`);
    return EXIT.failure;
  }
}
