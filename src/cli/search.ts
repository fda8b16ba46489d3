/**
 * `threadkeep search <text>`: one owner's messages across their sessions, in any search mode (the
 * same search as GET /v1/search and the chat's /search).
 */
import type { Command } from "commander";
import { describeCommand } from "./_commands.js";
import { ThreadkeepError } from "../core/errors.js";
import { createMemory } from "../create-memory.js";
import { parsePositiveInt } from "../core/policies.js";
import { SEARCH_MODES, type SearchMode } from "../core/search.js";
import { oneLine, paintFor } from "./_format.js";
import { addEmbeddingOptions, embedderFor, type RecallFlags, resolveRecallConfig } from "./_recall-options.js";
import { addStoreUrlOption } from "./_store.js";
import { resolveConfig } from "./options.js";

interface SearchFlags {
  store?: string;
  user?: string;
  session?: string;
  mode?: string;
  limit: string;
  json?: boolean;
  upstream?: string;
  upstreamKey?: string;
}

function parseMode(mode: string | undefined): SearchMode | "auto" {
  if (mode === undefined || mode === "auto") return "auto";
  if ((SEARCH_MODES as readonly string[]).includes(mode)) return mode as SearchMode;
  throw new ThreadkeepError("invalid_request", `--mode must be one of auto, ${SEARCH_MODES.join(", ")}; got "${mode}"`);
}

async function search(text: string, flags: SearchFlags & RecallFlags): Promise<void> {
  const limit = parsePositiveInt(flags.limit, "--limit");
  const mode = parseMode(flags.mode);
  const config = resolveConfig({ store: flags.store, upstream: flags.upstream, upstreamKey: flags.upstreamKey });
  const embedder = embedderFor(resolveRecallConfig(flags), config);
  const memory = createMemory({ store: config.store, ttlMs: config.ttlMs, embedder });
  try {
    const hits = await memory.search(text, { userId: flags.user, sessionId: flags.session, mode, limit });
    if (flags.json) return void process.stdout.write(`${JSON.stringify(hits, null, 2)}\n`);
    if (hits.length === 0) return void process.stdout.write("no matches\n");
    const paint = paintFor(process.stdout);
    for (const hit of hits) {
      const score = hit.score === undefined ? "" : paint.dim(` ${hit.score.toFixed(3)}`);
      process.stdout.write(`${paint.dim(`${hit.sessionId} #${hit.seq}`)}${score}  ${oneLine(hit.snippet, 100)}\n`);
    }
  } finally {
    await memory.close();
  }
}

/** What `--mode auto` does, as `--help` and docs/cli.md say it (a test holds them to the same words). */
export const AUTO_MODE_HELP =
  "auto (default): hybrid with embeddings, else relevance ranking: any of the words, best match first (BM25, stemmed)";

/** Adds `threadkeep search`. */
export function register(program: Command): void {
  addStoreUrlOption(
    addEmbeddingOptions(
      program
        .command("search")
        .description(describeCommand("search"))
        .argument("<text>", "what to find")
        .option("--user <id>", "whose sessions (default: the default user)")
        .option("--session <id>", "only this session")
        .option("--mode <mode>", `${AUTO_MODE_HELP}; or ${SEARCH_MODES.join(", ")}`)
        .option("--limit <n>", "most hits", "20")
        .option(
          "--upstream <url>",
          "OpenAI-compatible base URL that serves the embedding model (env THREADKEEP_UPSTREAM_URL)",
        )
        .option("--upstream-key <key>", "API key for the upstream (env THREADKEEP_UPSTREAM_API_KEY)")
        .option("--json", "print JSON"),
    ),
  ).action(search);
}
