/**
 * The summary settings of `serve` and `chat`: summaries are on by default wherever an upstream model
 * is configured, written by the upstream's model unless `--summary-model` names another, and off with
 * `--no-summaries` (or THREADKEEP_SUMMARIES=off).
 */
import type { Command } from "commander";
import { ThreadkeepError } from "../core/errors.js";
import type { MemoryOptions } from "../core/memory.js";
import type { Upstream } from "../llm/openai-compatible.js";
import { createSummarizer } from "../llm/summarizer.js";
import type { ThreadkeepConfig } from "./options.js";

/** The flags commander hands over (`--no-summaries` sets `summaries: false`). */
export interface RecallFlags {
  summaries?: boolean;
  summaryModel?: string;
}

/** Resolved summary settings. */
export interface RecallConfig {
  /** Summarise what leaves the window. */
  summaries: boolean;
  /** The model that writes summaries; unset: the model of the conversation's latest reply. */
  summaryModel?: string;
}

/** An on/off environment value; unset is `fallback`. @throws `invalid_request` for anything else. */
export function parseSwitch(value: string | undefined, name: string, fallback: boolean): boolean {
  if (value === undefined || value === "") return fallback;
  const v = value.trim().toLowerCase();
  if (["1", "on", "true", "yes"].includes(v)) return true;
  if (["0", "off", "false", "no"].includes(v)) return false;
  throw new ThreadkeepError("invalid_request", `${name} must be on or off, got "${value}"`);
}

/** Resolves the summary settings from flags, then environment, then defaults. */
export function resolveRecallConfig(flags: RecallFlags, env: NodeJS.ProcessEnv = process.env): RecallConfig {
  const summaries = flags.summaries === false ? false : parseSwitch(env.THREADKEEP_SUMMARIES, "THREADKEEP_SUMMARIES", true);
  return { summaries, summaryModel: flags.summaryModel ?? (env.THREADKEEP_SUMMARY_MODEL || undefined) };
}

/** Adds `--summary-model` and `--no-summaries`. */
export function addRecallOptions(command: Command): Command {
  return command
    .option(
      "--summary-model <name>",
      "model that summarises what leaves the window (env THREADKEEP_SUMMARY_MODEL; default: the conversation's model)",
    )
    .option("--no-summaries", "never summarise; older turns are then left out (env THREADKEEP_SUMMARIES=off)");
}

/**
 * The memory options that turn summaries on: a summarizer on the upstream, compacting in the
 * background after each turn, so no reply waits for a summary. None without an upstream.
 */
export function recallMemoryOptions(
  recall: RecallConfig,
  config: Pick<ThreadkeepConfig, "model">,
  upstream: Upstream | undefined,
): Partial<MemoryOptions> {
  if (!recall.summaries || !upstream) return {};
  const model = recall.summaryModel ?? config.model;
  return {
    summarizer: createSummarizer({ baseUrl: "", upstream, model }),
    compaction: { background: true },
  };
}
