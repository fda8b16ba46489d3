/**
 * The summary, embedding and recall settings of `serve`, `chat`, `search` and `reindex`. Summaries are
 * on by default wherever an upstream model is configured, written by the upstream's model unless
 * `--summary-model` names another, and off with `--no-summaries` (or THREADKEEP_SUMMARIES=off).
 * Embeddings are off until `--embedding-model` names a model (served by `--embedding-url`, default the
 * upstream). Recall is on unless `--no-recall` (by meaning with embeddings, by words without), in the
 * session only unless `--recall-scope user`.
 */
import type { Command } from "commander";
import { ThreadkeepError } from "../core/errors.js";
import type { MemoryOptions } from "../core/memory/memory.js";
import type { Upstream } from "../llm/openai-compatible.js";
import type { Embedder } from "../core/embeddings.js";
import type { RecallScope } from "../core/context/recall.js";
import { createEmbedder } from "../llm/embedder.js";
import { createSummarizer } from "../llm/summarizer.js";
import type { ThreadkeepConfig } from "./options.js";

/** The flags commander hands over (`--no-summaries` sets `summaries: false`). */
export interface RecallFlags {
  summaries?: boolean;
  summaryModel?: string;
  embeddingModel?: string;
  embeddingUrl?: string;
  embeddingKey?: string;
  recall?: boolean;
  recallScope?: string;
  memories?: string;
  memoryModel?: string;
}

/** Resolved summary settings. */
export interface RecallConfig {
  /** Summarise what leaves the window. */
  summaries: boolean;
  /** The model that writes summaries; unset: the model of the conversation's latest reply. */
  summaryModel?: string;
  /** The embedding model; unset: no embeddings (no semantic search, no recall). */
  embeddingModel?: string;
  /** Where embeddings are served; unset: the upstream. */
  embeddingUrl?: string;
  embeddingKey?: string;
  /** Recall related older messages into the context. */
  recall: boolean;
  /** Where recall looks: the session, or also the owner's other sessions. */
  recallScope: RecallScope;
  /** `auto`: the model writes memories about the user after each turn (in the background). */
  memories?: "auto" | "off";
  /** The model that writes memories; unset: the server's `--model`. */
  memoryModel?: string;
}

/** A recall scope from a flag or the environment. @throws `invalid_request` for anything but session or user. */
export function parseRecallScope(value: string | undefined, name: string): RecallScope {
  if (value === undefined || value === "") return "session";
  const v = value.trim().toLowerCase();
  if (v === "session" || v === "user") return v;
  throw new ThreadkeepError("invalid_request", `${name} must be session or user, got "${value}"`);
}

/** An on/off environment value; unset is `fallback`. @throws `invalid_request` for anything else. */
export function parseSwitch(value: string | undefined, name: string, fallback: boolean): boolean {
  if (value === undefined || value === "") return fallback;
  const v = value.trim().toLowerCase();
  if (["1", "on", "true", "yes"].includes(v)) return true;
  if (["0", "off", "false", "no"].includes(v)) return false;
  throw new ThreadkeepError("invalid_request", `${name} must be on or off, got "${value}"`);
}

/** `auto` or `off` (the default). @throws `invalid_request` for anything else. */
function parseMemoriesMode(value: string | undefined): "auto" | "off" {
  const v = value?.trim().toLowerCase();
  if (v === undefined || v === "" || v === "off") return "off";
  if (v === "auto") return "auto";
  throw new ThreadkeepError("invalid_request", `--memories (THREADKEEP_MEMORIES) must be auto or off, got "${value}"`);
}

/** Resolves the summary settings from flags, then environment, then defaults. */
export function resolveRecallConfig(flags: RecallFlags, env: NodeJS.ProcessEnv = process.env): RecallConfig {
  const summaries =
    flags.summaries === false ? false : parseSwitch(env.THREADKEEP_SUMMARIES, "THREADKEEP_SUMMARIES", true);
  return {
    summaries,
    summaryModel: flags.summaryModel ?? (env.THREADKEEP_SUMMARY_MODEL || undefined),
    embeddingModel: flags.embeddingModel ?? (env.THREADKEEP_EMBEDDING_MODEL || undefined),
    embeddingUrl: (flags.embeddingUrl ?? (env.THREADKEEP_EMBEDDING_URL || undefined))?.replace(/\/+$/, ""),
    embeddingKey: flags.embeddingKey ?? (env.THREADKEEP_EMBEDDING_API_KEY || undefined),
    recall: flags.recall === false ? false : parseSwitch(env.THREADKEEP_RECALL, "THREADKEEP_RECALL", true),
    recallScope:
      flags.recallScope !== undefined
        ? parseRecallScope(flags.recallScope, "--recall-scope")
        : parseRecallScope(env.THREADKEEP_RECALL_SCOPE, "THREADKEEP_RECALL_SCOPE"),
    memories: parseMemoriesMode(flags.memories ?? (env.THREADKEEP_MEMORIES || undefined)),
    memoryModel: flags.memoryModel ?? (env.THREADKEEP_MEMORY_MODEL || undefined),
  };
}

/** Adds `--embedding-model`, `--embedding-url`, `--embedding-key` (search, reindex, serve, chat). */
export function addEmbeddingOptions(command: Command): Command {
  return command
    .option(
      "--embedding-model <name>",
      "embedding model for semantic search and recall; off when unset (env THREADKEEP_EMBEDDING_MODEL)",
    )
    .option(
      "--embedding-url <url>",
      "OpenAI-compatible base URL serving /embeddings (env THREADKEEP_EMBEDDING_URL; default: --upstream)",
    )
    .option(
      "--embedding-key <key>",
      "API key for --embedding-url (env THREADKEEP_EMBEDDING_API_KEY; default: --upstream-key)",
    );
}

/** The embedder the settings name, or none. @throws `invalid_request` when no URL serves the model. */
export function embedderFor(
  recall: RecallConfig,
  config: Pick<ThreadkeepConfig, "upstreamUrl" | "upstreamKey">,
): Embedder | undefined {
  if (!recall.embeddingModel) return undefined;
  const baseUrl = recall.embeddingUrl ?? config.upstreamUrl;
  if (!baseUrl) {
    throw new ThreadkeepError(
      "invalid_request",
      "--embedding-model needs --embedding-url (or --upstream) to reach the model",
    );
  }
  const apiKey = recall.embeddingKey ?? (recall.embeddingUrl ? undefined : config.upstreamKey);
  return createEmbedder({ baseUrl, apiKey, model: recall.embeddingModel });
}

/** Adds `--summary-model` and `--no-summaries`. */
export function addRecallOptions(command: Command): Command {
  return command
    .option(
      "--summary-model <name>",
      "model that summarises what leaves the window (env THREADKEEP_SUMMARY_MODEL; default: the conversation's model)",
    )
    .option("--no-summaries", "never summarise; older turns are then left out (env THREADKEEP_SUMMARIES=off)")
    .option(
      "--memories <mode>",
      "auto: after each turn the model writes durable facts about the user (memories) in the background; off: only by hand (env THREADKEEP_MEMORIES; default off)",
    )
    .option("--memory-model <name>", "model that writes memories (env THREADKEEP_MEMORY_MODEL; default: --model)")
    .option("--no-recall", "do not bring related older messages back into the context (env THREADKEEP_RECALL=off)")
    .option(
      "--recall-scope <scope>",
      "session: recall from the conversation itself; user: also from the same user's other conversations (env THREADKEEP_RECALL_SCOPE; default: session)",
    );
}

/**
 * The memory options that turn summaries on: a summarizer on the upstream, compacting in the
 * background after each turn, so no reply waits for a summary. None without an upstream.
 */
export function recallMemoryOptions(
  recall: RecallConfig,
  config: Pick<ThreadkeepConfig, "model" | "upstreamUrl" | "upstreamKey">,
  upstream: Upstream | undefined,
): Partial<MemoryOptions> {
  const embedder = embedderFor(recall, config);
  const embedding: Partial<MemoryOptions> = {
    ...(embedder ? { embedder } : {}),
    recall: { enabled: recall.recall, scope: recall.recallScope },
  };
  if (!recall.summaries || !upstream) return embedding;
  const model = recall.summaryModel ?? config.model;
  return {
    ...embedding,
    summarizer: createSummarizer({ baseUrl: "", upstream, model }),
    compaction: { background: true },
  };
}
