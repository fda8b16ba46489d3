import { inSpan, modelRequestAttributes, recordModelResponse } from "../core/tracing.js";
import { formatTranscript, type SummarizeRequest, type Summarizer } from "../core/context/summarize.js";
import { ThreadkeepError } from "../core/errors.js";
import type { Message } from "../core/types.js";
import { createUpstream, type Upstream, UpstreamError } from "./openai-compatible.js";

/** The instructions the default summarizer gives its model. */
export const DEFAULT_SUMMARY_INSTRUCTIONS =
  "You maintain the running summary of a conversation between a user and an assistant. Write a concise summary " +
  "that keeps what later turns may need: facts about the user, decisions, open questions and tasks, names, ids " +
  "and numbers (keep them exact), and what tools returned. Fold the previous summary in; drop small talk. Write " +
  "in the conversation's language, in plain prose or short bullet points, without preamble.";

/** Options of {@link createSummarizer}. */
export interface SummarizerOptions {
  /** Base URL of an OpenAI-compatible API including the version path, e.g. `http://127.0.0.1:11434/v1`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer …` when set. */
  apiKey?: string;
  /**
   * The model that writes summaries (a small, cheap one does well).
   * @default the model that wrote the newest assistant message being summarised (`metadata.model`)
   */
  model?: string;
  /** Longest summary, in tokens (sent as `max_tokens`). @default 500 */
  maxTokens?: number;
  /** @default 0.2 */
  temperature?: number;
  /** The system prompt. @default {@link DEFAULT_SUMMARY_INSTRUCTIONS} */
  instructions?: string;
  /** Longer message texts are cut to this many characters in the transcript. @default 2000 */
  maxCharsPerMessage?: number;
  /** Gives up after this long. @default 60000 */
  timeoutMs?: number;
  /** Extra fields merged into the request body (e.g. `{ max_completion_tokens: 500 }` for models that want it). */
  extraBody?: Record<string, unknown>;
  /** An existing client to use instead of one made from `baseUrl` and `apiKey`. */
  upstream?: Upstream;
}

/** The chat request body the default summarizer sends for a request. */
export function summaryRequestBody(request: SummarizeRequest, options: SummarizerOptions): Record<string, unknown> {
  const transcript = formatTranscript(request.messages, { maxCharsPerMessage: options.maxCharsPerMessage });
  const previous = request.previous
    ? `Previous summary (messages ${request.previous.fromSeq}–${request.previous.toSeq}):\n${request.previous.content}\n\n`
    : "";
  const model = options.model ?? modelOf(request.messages);
  if (!model) {
    throw new ThreadkeepError(
      "invalid_request",
      "No summary model: set one (--summary-model, THREADKEEP_SUMMARY_MODEL) or let a reply name its model",
    );
  }
  const first = request.messages[0]?.seq;
  const last = request.messages.at(-1)?.seq;
  return {
    model,
    messages: [
      { role: "system", content: options.instructions ?? DEFAULT_SUMMARY_INSTRUCTIONS },
      {
        role: "user",
        content: `${previous}New messages ${first}–${last}:\n${transcript}\n\nWrite the updated summary.`,
      },
    ],
    max_tokens: options.maxTokens ?? 500,
    temperature: options.temperature ?? 0.2,
    ...options.extraBody,
  };
}

/** The model of the newest assistant message that names one (the server stores it with each reply). */
function modelOf(messages: readonly Message[]): string | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const model = messages[i].metadata?.model;
    if (messages[i].role === "assistant" && typeof model === "string" && model) return model;
  }
  return undefined;
}

/**
 * The default {@link Summarizer}: asks an OpenAI-compatible chat model (OpenAI, Ollama, vLLM, …) to
 * fold a range of messages into the session's running summary.
 * @example
 * ```ts
 * import { createMemory, createSummarizer } from "threadkeep";
 *
 * const summarizer = createSummarizer({ baseUrl: "https://api.openai.com/v1", apiKey: process.env.OPENAI_API_KEY, model: "gpt-4o-mini" });
 * const memory = createMemory({ store: "sqlite:./data/threadkeep.db", summarizer });
 * ```
 */
export function createSummarizer(options: SummarizerOptions): Summarizer {
  const upstream =
    options.upstream ??
    createUpstream({
      baseUrl: options.baseUrl,
      apiKey: options.apiKey,
      timeoutMs: options.timeoutMs ?? 60_000,
    });
  return {
    async summarize(request) {
      const body = summaryRequestBody(request, options);
      const attributes = modelRequestAttributes("chat", body.model, request.sessionId);
      const reply = await inSpan("threadkeep.summarize", { kind: "client", attributes }, async (span) => {
        const answered = await upstream.chat(body, { signal: request.signal });
        recordModelResponse(span, {
          model: answered?.model,
          id: answered?.id,
          usage: answered?.usage,
          finishReason: answered?.choices?.[0]?.finish_reason,
        });
        return answered;
      });
      const content = reply?.choices?.[0]?.message?.content;
      const text = typeof content === "string" ? content.trim() : "";
      if (!text) {
        throw new UpstreamError(200, reply, `The summary model ${String(body.model)} answered without text`);
      }
      return text;
    },
  };
}
