/**
 * The settings of `serve` as data: each option's flag, environment variable and default, read from
 * the command's own definitions (so docs/configuration.md is generated from them and cannot drift),
 * and the optional `--config FILE` (JSON or YAML, the options' names as keys), which sits between
 * the environment and the defaults: flags > environment > file > defaults.
 */
import { readFileSync } from "node:fs";
import type { Command, Option } from "commander";
import { ThreadkeepError } from "../core/errors.js";

/** One option of a command, as the configuration reference lists it. */
export interface SettingSpec {
  /** The long flag, e.g. `--port`. */
  flag: string;
  /** The file key: the flag without its dashes (`port`, `api-keys`; `summaries` for `--no-summaries`). */
  key: string;
  /** What the flag takes, e.g. `<n>`; empty for a switch. */
  argument: string;
  /** The environment variable, e.g. `THREADKEEP_PORT`. */
  env: string;
  /** For a `--no-x` switch: the value of the variable that means the same (`off`). */
  envValue?: string;
  /** The default as the help says it; empty when none. */
  default: string;
  /** The help text without its `(env …; default …)` part. */
  description: string;
  negate: boolean;
}

/** Options that configure nothing the file could set. */
const NOT_SETTINGS = new Set(["--help", "--config"]);

/**
 * The settings of `command` from its options' help texts, which name their variable (`env NAME`,
 * `env NAME=value` for a switch) and default (`default x`).
 * @throws Error for an option whose help names no variable: every setting must have one.
 */
export function settingsOf(command: Command): SettingSpec[] {
  return (command.options as Option[])
    .filter((o) => o.long && !NOT_SETTINGS.has(o.long))
    .map((o) => {
      const text = o.description;
      const env = /\benv (THREADKEEP_[A-Z0-9_]+)(?:=(\w+))?/.exec(text);
      if (!env) throw new Error(`${o.long}: its help names no THREADKEEP_* variable`);
      const fallback = /\bdefault:? ([^;)]+(?:\([^)]*\))?[^;)]*)/.exec(text);
      // The parenthetical that holds the variable (and the default) leaves the description.
      const description = text
        .replace(/\s*\((?:prefer the )?env [^()]*(?:\([^)]*\)[^()]*)*\)/, "")
        .replace(/;?\s*prefer the env THREADKEEP_[A-Z_]+/, "")
        .trim();
      const long = o.long!;
      return {
        flag: long,
        key: o.negate ? long.replace(/^--no-/, "") : long.replace(/^--/, ""),
        argument: o.flags.replace(/^.*?--[\w-]+\s*/, ""),
        env: env[1],
        ...(env[2] ? { envValue: env[2] } : {}),
        default: fallback ? fallback[1].trim() : "",
        description,
        negate: o.negate,
      };
    });
}

const escapeCell = (text: string) => text.replace(/\|/g, "\\|");

/** The Markdown table of `command`'s settings: flag, file key, variable, default, meaning. */
export function settingsTable(command: Command): string {
  const rows = settingsOf(command).map((s) => {
    const flag = s.argument ? `\`${s.flag} ${s.argument}\`` : `\`${s.flag}\``;
    const env = s.envValue ? `\`${s.env}=${s.envValue}\`` : `\`${s.env}\``;
    const fileKey = s.negate ? `\`${s.key}: false\`` : `\`${s.key}\``;
    return `| ${flag} | ${fileKey} | ${env} | ${s.default ? escapeCell(s.default) : "–"} | ${escapeCell(s.description)} |`;
  });
  return [
    "| flag | file key | environment | default | what it sets |",
    "| --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

/** Reads a config file: JSON when it parses as JSON (or ends in .json), YAML otherwise. */
async function readConfigFile(path: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new ThreadkeepError("invalid_request", `--config ${path}: cannot read it (${(error as Error).message})`, {
      cause: error,
    });
  }
  let data: unknown;
  try {
    if (/\.json$/i.test(path)) data = JSON.parse(text);
    else data = (await import("yaml")).parse(text);
  } catch (error) {
    throw new ThreadkeepError(
      "invalid_request",
      `--config ${path}: not valid ${/\.json$/i.test(path) ? "JSON" : "YAML"}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  if (data === null || data === undefined) return {};
  if (typeof data !== "object" || Array.isArray(data)) {
    throw new ThreadkeepError("invalid_request", `--config ${path}: expected a mapping of option names to values`);
  }
  return data as Record<string, unknown>;
}

/**
 * The environment `command` resolves its settings from, with `--config FILE`'s values under the
 * real environment: a key the environment already sets is left as the environment has it. A flag
 * on the command line wins over both, as the resolvers read flags first.
 * @throws ThreadkeepError `invalid_request` naming the file and key for an unknown key or a value
 * that is not a string, number or boolean (a list is accepted where the option takes a comma list).
 */
export async function environmentWithFile(
  command: Command,
  path: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<NodeJS.ProcessEnv> {
  if (!path) return env;
  const data = await readConfigFile(path);
  const byKey = new Map(settingsOf(command).map((s) => [s.key, s]));
  const merged: NodeJS.ProcessEnv = { ...env };
  for (const [key, value] of Object.entries(data)) {
    const spec = byKey.get(key);
    if (!spec) {
      throw new ThreadkeepError(
        "invalid_request",
        `--config ${path}: unknown key "${key}"; the keys are the options of serve without their dashes (${[...byKey.keys()].slice(0, 4).join(", ")}, …)`,
      );
    }
    let text: string;
    if (spec.negate) {
      if (typeof value !== "boolean")
        throw new ThreadkeepError(
          "invalid_request",
          `--config ${path}: ${key} must be true or false (as --${spec.flag.slice(2)}), got ${JSON.stringify(value)}`,
        );
      text = value ? "on" : (spec.envValue ?? "off");
    } else if (Array.isArray(value) && value.every((v) => typeof v === "string" || typeof v === "number")) {
      text = value.join(",");
    } else if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
      text = String(value);
    } else {
      throw new ThreadkeepError(
        "invalid_request",
        `--config ${path}: ${key} (${spec.flag}) must be a string, number or list, got ${JSON.stringify(value)}`,
      );
    }
    if (merged[spec.env] === undefined || merged[spec.env] === "") merged[spec.env] = text;
  }
  return merged;
}
