import { inSpan, modelRequestAttributes } from "../core/tracing.js";
import type { Embedder } from "../core/embeddings.js";
import { createUpstream, type Upstream } from "./openai-compatible.js";

/** Options of {@link createEmbedder}. */
export interface EmbedderOptions {
  /** Base URL of an OpenAI-compatible API including the version path, e.g. `http://127.0.0.1:11434/v1`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer …` when set. */
  apiKey?: string;
  /** The embedding model, e.g. `text-embedding-3-small` or `nomic-embed-text`. */
  model: string;
  /** Gives up after this long. @default 30000 */
  timeoutMs?: number;
  /** An existing client to use instead of one made from `baseUrl` and `apiKey`. */
  upstream?: Upstream;
}

/**
 * An {@link Embedder} over any OpenAI-compatible `POST /embeddings` (OpenAI, Ollama, vLLM, llama.cpp, …).
 * @example
 * ```ts
 * import { createEmbedder, createMemory } from "threadkeep";
 *
 * const embedder = createEmbedder({ baseUrl: "http://127.0.0.1:11434/v1", model: "nomic-embed-text" });
 * const memory = createMemory({ store: "sqlite:./data/threadkeep.db", embedder });
 * ```
 */
export function createEmbedder(options: EmbedderOptions): Embedder {
  const upstream =
    options.upstream ??
    createUpstream({ baseUrl: options.baseUrl, apiKey: options.apiKey, timeoutMs: options.timeoutMs ?? 30_000 });
  return {
    model: options.model,
    embed: (texts) =>
      inSpan(
        "threadkeep.embed",
        {
          kind: "client",
          attributes: { ...modelRequestAttributes("embeddings", options.model), "threadkeep.texts": texts.length },
        },
        () => upstream.embeddings(texts, options.model),
      ),
  };
}
