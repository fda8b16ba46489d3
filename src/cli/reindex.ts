/**
 * `threadkeep reindex`: embeds every stored message that has no vector of the embedding model yet —
 * messages from before embeddings were on, from an embeddings outage, or after a model change —
 * with a progress bar like migrate's on standard error.
 */
import type { Command } from "commander";
import { describeCommand } from "./_commands.js";
import { iterateAllSessions } from "../core/enumerate.js";
import { createMemory } from "../create-memory.js";
import { addEmbeddingOptions, embedderFor, type RecallFlags, resolveRecallConfig } from "./_recall-options.js";
import { createProgress, formatDuration } from "./_progress.js";
import { addStoreUrlOption } from "./_store.js";
import { resolveConfig } from "./options.js";
import { ThreadkeepError } from "../core/errors.js";

interface ReindexFlags extends RecallFlags {
  store?: string;
  upstream?: string;
  upstreamKey?: string;
}

async function reindex(flags: ReindexFlags): Promise<void> {
  const config = resolveConfig({ store: flags.store, upstream: flags.upstream, upstreamKey: flags.upstreamKey });
  const embedder = embedderFor(resolveRecallConfig(flags), config);
  if (!embedder)
    throw new ThreadkeepError("invalid_request", "reindex needs --embedding-model (or THREADKEEP_EMBEDDING_MODEL)");
  const memory = createMemory({ store: config.store, ttlMs: 0, embedder });
  const started = Date.now();
  try {
    let total = 0;
    for await (const _ of iterateAllSessions(await memory.store())) total++;
    const progress = createProgress({ output: process.stderr, total, label: "reindex" });
    const result = await memory.reindex((sessions, messages) => progress.update({ sessions, messages }));
    progress.finish();
    process.stdout.write(
      `embedded ${result.embedded} message(s) in ${result.sessions} session(s) with ${embedder.model} in ${formatDuration(Date.now() - started)}\n`,
    );
  } finally {
    await memory.close();
  }
}

/** Adds `threadkeep reindex`. */
export function register(program: Command): void {
  addStoreUrlOption(
    addEmbeddingOptions(
      program
        .command("reindex")
        .description(describeCommand("reindex"))
        .option(
          "--upstream <url>",
          "OpenAI-compatible base URL that serves the embedding model (env THREADKEEP_UPSTREAM_URL)",
        )
        .option("--upstream-key <key>", "API key for the upstream (env THREADKEEP_UPSTREAM_API_KEY)"),
    ),
  ).action(reindex);
}
