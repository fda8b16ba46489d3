/**
 * The retrieval benchmark's embedder: none (the default), a user's own OpenAI-compatible embeddings
 * endpoint, or the test suite's fake upstream started on 127.0.0.1, so hybrid search and recall (which
 * fuse the lexical ranking with the embeddings' by reciprocal rank) can be measured end to end.
 *
 * - `--embedding-url URL --embedding-model NAME` (or `THREADKEEP_EMBEDDING_URL` and
 *   `THREADKEEP_EMBEDDING_MODEL`, as `threadkeep serve` reads them); an endpoint that needs a key gets
 *   it from `THREADKEEP_EMBEDDING_API_KEY`, never from the command line. E.g. Ollama:
 *   `--embedding-url http://127.0.0.1:11434/v1 --embedding-model nomic-embed-text`.
 * - `--fake-embedder`: test/_fake-upstream.ts's embeddings (16 dimensions: eight synonym groups and
 *   eight hashed word buckets), no model. Its figures measure the plumbing and the fusion's cost, not
 *   what a real model finds.
 */
import type { Embedder } from "../src/core/embeddings.js";
import { createEmbedder } from "../src/llm/embedder.js";
import { startFakeUpstream } from "../test/_fake-upstream.js";

/** The `parseArgs` options the embedder choice takes. */
export const EMBEDDER_ARGS = {
  "embedding-url": { type: "string" },
  "embedding-model": { type: "string" },
  "fake-embedder": { type: "boolean", default: false },
} as const;

/** The model name the fake upstream is asked for (it embeds the same whatever the name). */
export const FAKE_EMBEDDING_MODEL = "fake-embedding";

/** Which embedder a run uses. */
export type EmbedderChoice =
  { kind: "none" } | { kind: "fake" } | { kind: "endpoint"; url: string; model: string; apiKey?: string };

/**
 * The embedder the arguments (and environment) name. @throws when both a URL and the fake are asked
 * for, or a URL without a model (or a model without a URL).
 */
export function embedderChoice(
  values: { "embedding-url"?: string; "embedding-model"?: string; "fake-embedder"?: boolean },
  env: NodeJS.ProcessEnv = process.env,
): EmbedderChoice {
  const url = (values["embedding-url"] ?? (env.THREADKEEP_EMBEDDING_URL || undefined))?.replace(/\/+$/, "");
  const model = values["embedding-model"] ?? (env.THREADKEEP_EMBEDDING_MODEL || undefined);
  if (values["fake-embedder"]) {
    if (values["embedding-url"] !== undefined || values["embedding-model"] !== undefined)
      throw new Error("--fake-embedder and --embedding-url/--embedding-model: pick one");
    return { kind: "fake" };
  }
  if (url === undefined && model === undefined) return { kind: "none" };
  if (url === undefined || model === undefined)
    throw new Error(
      "An embedder needs both --embedding-url (env THREADKEEP_EMBEDDING_URL) and --embedding-model " +
        "(env THREADKEEP_EMBEDDING_MODEL), e.g. --embedding-url http://127.0.0.1:11434/v1 --embedding-model nomic-embed-text",
    );
  if (!/^https?:\/\//.test(url)) throw new Error(`--embedding-url takes an http(s) URL, got ${url}`);
  return { kind: "endpoint", url, model, apiKey: env.THREADKEEP_EMBEDDING_API_KEY || undefined };
}

/** An opened embedder (none for `none`), what to print about it, and what to close afterwards. */
export interface BenchEmbedder {
  embedder?: Embedder;
  /** E.g. `none`, `fake (test/_fake-upstream.ts, 127.0.0.1:PORT)`, `nomic-embed-text at http://…`. */
  label: string;
  close(): Promise<void>;
}

/** Opens the chosen embedder; the fake upstream listens on an ephemeral port of 127.0.0.1 until closed. */
export async function openBenchEmbedder(choice: EmbedderChoice): Promise<BenchEmbedder> {
  if (choice.kind === "none") return { label: "none", close: async () => {} };
  if (choice.kind === "endpoint") {
    return {
      embedder: createEmbedder({ baseUrl: choice.url, apiKey: choice.apiKey, model: choice.model }),
      label: `${choice.model} at ${choice.url}`,
      close: async () => {},
    };
  }
  const upstream = await startFakeUpstream();
  return {
    embedder: createEmbedder({ baseUrl: upstream.url, model: FAKE_EMBEDDING_MODEL }),
    label: `fake (test/_fake-upstream.ts at ${upstream.url}: 16 dimensions, no model)`,
    close: () => upstream.close(),
  };
}
