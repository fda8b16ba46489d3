/**
 * The `threadkeep` commands as the top-level help lists them: name, how the listing writes its
 * arguments, and a one-line description. No imports, so `threadkeep --help` loads no command; each
 * command file takes its description from here, and test/internals/lazy-commands.mock.test.ts checks that the
 * listing equals the one the loaded commands produce.
 */

/** One command of the table: the file that registers it and what the top-level help shows. */
export interface CommandSummary {
  /** The command's name, as typed after `threadkeep`. */
  name: string;
  /** The listing's left column, e.g. `import [options] <file>`. */
  term: string;
  /** The listing's right column, also the command's own description. */
  description: string;
  /** The file under src/cli (as built) whose `register` adds the command. */
  file: string;
}

/** Every command, in the order the help lists them. */
export const COMMAND_SUMMARIES: readonly CommandSummary[] = [
  {
    name: "serve",
    term: "serve [options]",
    description: "Run the OpenAI-compatible memory proxy and the session API",
    file: "./serve.js",
  },
  {
    name: "chat",
    term: "chat [options]",
    description:
      "Chat with an OpenAI-compatible model, the conversation kept in the store; /help lists the slash commands",
    file: "./chat.js",
  },
  {
    name: "sessions",
    term: "sessions",
    description: "List, show, delete and prune stored sessions (table on a terminal, --json for scripts)",
    file: "./sessions.js",
  },
  {
    name: "memories",
    term: "memories",
    description: "List, add, edit and delete what is remembered about a user (--user; --json for scripts)",
    file: "./memories.js",
  },
  {
    name: "users",
    term: "users",
    description: "Erase everything kept about a user: sessions and memories (users erase <userId>)",
    file: "./memories.js",
  },
  {
    name: "export",
    term: "export [options]",
    description: "Write sessions as JSONL: sessions, messages, summaries and state (format in docs/cli.md)",
    file: "./export-import.js",
  },
  {
    name: "import",
    term: "import [options] <file>",
    description: "Read sessions from a threadkeep JSONL export; importing the same file again changes nothing",
    file: "./export-import.js",
  },
  {
    name: "migrate",
    term: "migrate [options]",
    description:
      "Copy every session between two stores (e.g. the SQLite file to PostgreSQL); safe to interrupt and re-run",
    file: "./migrate.js",
  },
  {
    name: "search",
    term: "search [options] <text>",
    description: "Search one owner's messages across their sessions (best first for semantic and hybrid)",
    file: "./search.js",
  },
  {
    name: "reindex",
    term: "reindex [options]",
    description: "Embed every stored message that lacks a vector of the embedding model (progress on standard error)",
    file: "./reindex.js",
  },
  {
    name: "mcp",
    term: "mcp [options]",
    description: "Serve the sessions to an MCP client over stdio (tools: list, read, search, recall, context, state)",
    file: "./mcp.js",
  },
];

/** The description of the command `name` (for its own `.description(…)`). */
export function describeCommand(name: string): string {
  const summary = COMMAND_SUMMARIES.find((c) => c.name === name);
  if (!summary) throw new Error(`no command ${name} in src/cli/_commands.ts`);
  return summary.description;
}
