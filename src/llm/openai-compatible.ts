import type { IncomingHttpHeaders } from "node:http";
import { ThreadkeepError } from "../core/errors.js";
import { createSender, type RawResponse } from "./_upstream-http.js";

/** Where an OpenAI-compatible API lives. */
export interface UpstreamOptions {
  /** Base URL including the version path, e.g. `http://127.0.0.1:11434/v1`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer …` when set. */
  apiKey?: string;
  /**
   * Gives up when the upstream has not answered within this long: the response head for a stream,
   * the whole body otherwise; and a stream that then sends nothing for this long (a reply still
   * flowing is never cut, however long it runs). @default 120000
   */
  timeoutMs?: number;
}

/** Upstream response headers a client needs to see: rate limits, back-off, the request id for support. */
const CLIENT_HEADER = /^(retry-after(-ms)?|x-ratelimit-.+|x-request-id|openai-processing-ms)$/;

/** The headers of an upstream response that are passed back to the client, by lower-case name. */
export function clientHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || !CLIENT_HEADER.test(name)) continue;
    picked[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return picked;
}

/** The upstream answered with an error status; its status, body and client headers are kept to pass back. */
export class UpstreamError extends ThreadkeepError {
  /** The upstream's HTTP status (0 when it could not be reached). */
  readonly upstreamStatus: number;
  /** The upstream's error body, parsed when it was JSON. */
  readonly upstreamBody: unknown;
  /** The upstream's headers a client needs (`retry-after`, `x-ratelimit-*`, `x-request-id`). */
  readonly upstreamHeaders: Record<string, string>;
  /** The upstream went silent past the timeout (no head, no whole body, or a stream that stalled). */
  readonly timedOut: boolean;

  constructor(
    upstreamStatus: number,
    upstreamBody: unknown,
    message: string,
    options: { cause?: unknown; headers?: Record<string, string>; timedOut?: boolean } = {},
  ) {
    super("upstream_error", message, options);
    this.upstreamStatus = upstreamStatus;
    this.upstreamBody = upstreamBody;
    this.upstreamHeaders = options.headers ?? {};
    this.timedOut = options.timedOut ?? false;
  }
}

/** Options of one upstream call. */
export interface UpstreamCallOptions {
  signal?: AbortSignal;
  /** Receives the upstream's {@link clientHeaders} of a successful response. */
  onHeaders?: (headers: Record<string, string>) => void;
}

/** Token counts as an upstream reports them (OpenAI's `usage`); any may be missing. */
export interface CompletionUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number };
  completion_tokens_details?: { reasoning_tokens?: number };
}

/** A tool call of an assistant reply (in a chunk, a piece of one, placed by `index`). */
export interface CompletionToolCall {
  index?: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}

/** The assistant message of a reply, or the delta of a chunk. */
export interface CompletionMessage {
  role?: string;
  content?: string | null;
  refusal?: string | null;
  tool_calls?: CompletionToolCall[];
}

/**
 * A chat completion as an upstream sends it, parsed but not checked: OpenAI's fields threadkeep reads,
 * each optional because OpenAI-compatible servers differ in what they send. Readers check what they use.
 */
export interface ChatCompletion {
  id?: string;
  model?: string;
  choices?: { index?: number; message?: CompletionMessage; finish_reason?: string | null }[];
  usage?: CompletionUsage | null;
}

/** One chunk of a streamed chat completion, parsed but not checked, as {@link ChatCompletion}. */
export interface ChatCompletionChunk {
  id?: string;
  model?: string;
  choices?: { index?: number; delta?: CompletionMessage; finish_reason?: string | null }[];
  usage?: CompletionUsage | null;
}

/** One Server-Sent Event of a streamed chat completion. */
export interface StreamEvent {
  /** The `data:` payload as received (forwarded verbatim by the proxy). */
  data: string;
  /** The parsed chunk, or null for `[DONE]` and unparseable data. */
  chunk: ChatCompletionChunk | null;
}

/** A client for the parts of the OpenAI API threadkeep uses. */
export interface Upstream {
  readonly baseUrl: string;
  /** POST /chat/completions without streaming. @throws UpstreamError */
  chat(body: Record<string, unknown>, options?: UpstreamCallOptions): Promise<ChatCompletion>;
  /** POST /chat/completions with `stream: true`; yields events as they arrive. @throws UpstreamError before the first event */
  streamChat(body: Record<string, unknown>, options?: UpstreamCallOptions): Promise<AsyncIterable<StreamEvent>>;
  /** POST /embeddings. @throws UpstreamError */
  embeddings(input: string[], model: string, options?: { signal?: AbortSignal }): Promise<number[][]>;
  /** GET /models. @throws UpstreamError */
  models(options?: { signal?: AbortSignal }): Promise<unknown>;
}

/** The text each JSON reply of a {@link createUpstream} client was parsed from, by the parsed object. */
const replyTexts = new WeakMap<object, string>();

/**
 * The JSON text an upstream reply was parsed from, when `reply` came from a {@link createUpstream}
 * client's `chat` (undefined for any other value): the proxy passes these bytes on as they came.
 */
export function upstreamText(reply: unknown): string | undefined {
  return typeof reply === "object" && reply !== null ? replyTexts.get(reply) : undefined;
}

function parseBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function errorMessage(status: number, body: unknown): string {
  const inner = (body as { error?: { message?: string } } | null)?.error?.message;
  return `Upstream answered ${status}${inner ? `: ${inner}` : ""}`;
}

/** Splits an SSE byte stream into `data:` payloads. */
async function* sseData(body: AsyncIterable<Buffer>): AsyncIterable<string> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end = buffer.search(/\r?\n\r?\n/);
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      const data = block
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data) yield data;
      end = buffer.search(/\r?\n\r?\n/);
    }
  }
  const rest = buffer.trim();
  if (rest.startsWith("data:")) yield rest.slice(5).trim();
}

/**
 * Creates a client for an OpenAI-compatible API (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, …).
 * @example
 * ```ts
 * import { createUpstream } from "threadkeep/llm";
 *
 * const upstream = createUpstream({ baseUrl: "http://127.0.0.1:11434/v1" });
 * ```
 */
export function createUpstream(options: UpstreamOptions): Upstream {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? 120_000;
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
  };
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  const unreachable = (reason: string, cause: unknown, timedOut = false) => {
    const message = timedOut ? `Upstream ${baseUrl} ${reason}` : `Upstream ${baseUrl} unreachable: ${reason}`;
    const code = timedOut ? "upstream_timeout" : "upstream_unreachable";
    return new UpstreamError(0, { error: { message, type: "upstream_error", code } }, message, { cause, timedOut });
  };
  const request = createSender({
    base: new URL(baseUrl),
    headers,
    timeoutMs,
    clientHeader: CLIENT_HEADER,
    unreachable,
  });

  const refused = (response: RawResponse) => {
    const parsed = parseBody(response.text ?? "");
    return new UpstreamError(response.status, parsed, errorMessage(response.status, parsed), {
      headers: response.headers,
    });
  };

  const json = async (method: "GET" | "POST", path: string, body?: unknown, opts: UpstreamCallOptions = {}) => {
    const response = await request(method, path, body, opts.signal, true);
    if (!response.ok) throw refused(response);
    opts.onHeaders?.(response.headers);
    const text = response.text ?? "";
    const parsed = parseBody(text);
    if (typeof parsed === "object" && parsed !== null) replyTexts.set(parsed, text);
    return parsed;
  };

  return {
    baseUrl,
    chat: async (body, opts = {}) =>
      (await json("POST", "/chat/completions", { ...body, stream: false }, opts)) as ChatCompletion,
    async streamChat(body, opts = {}) {
      const response = await request("POST", "/chat/completions", { ...body, stream: true }, opts.signal, false);
      if (!response.ok) throw refused(response);
      opts.onHeaders?.(response.headers);
      const stream = response.body as AsyncIterable<Buffer>;
      return (async function* () {
        for await (const data of sseData(stream)) {
          let chunk: ChatCompletionChunk | null = null;
          if (data !== "[DONE]") {
            try {
              chunk = JSON.parse(data);
            } catch {
              chunk = null;
            }
          }
          yield { data, chunk };
        }
      })();
    },
    async embeddings(input, model, opts = {}) {
      const result = (await json("POST", "/embeddings", { input, model }, opts)) as { data: unknown };
      return (result.data as { index: number; embedding: number[] }[])
        .sort((a, b) => a.index - b.index)
        .map((d) => d.embedding);
    },
    models: (opts = {}) => json("GET", "/models", undefined, opts),
  };
}

/** Accumulates streamed chunks into the assistant message they spell. */
export class StreamAccumulator {
  content = "";
  #toolCalls: { id?: string; type?: string; function: { name: string; arguments: string } }[] = [];
  finishReason: string | null = null;
  model?: string;
  id?: string;

  add(chunk: ChatCompletionChunk | null | undefined): void {
    if (!chunk) return;
    this.id ??= chunk.id;
    this.model ??= chunk.model;
    const choice = chunk.choices?.[0];
    if (!choice) return;
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    const delta = choice.delta ?? {};
    if (typeof delta.content === "string") this.content += delta.content;
    for (const call of delta.tool_calls ?? []) {
      const index = call.index ?? this.#toolCalls.length;
      const slot = (this.#toolCalls[index] ??= { function: { name: "", arguments: "" } });
      if (call.id) slot.id = call.id;
      if (call.type) slot.type = call.type;
      if (call.function?.name) slot.function.name += call.function.name;
      if (call.function?.arguments) slot.function.arguments += call.function.arguments;
    }
  }

  /** The assistant message so far. */
  message(): {
    role: "assistant";
    content: string | null;
    tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
  } {
    const toolCalls = this.#toolCalls
      .filter(Boolean)
      .map((c) => ({ id: c.id ?? "", type: c.type ?? "function", function: c.function }));
    return toolCalls.length > 0
      ? { role: "assistant", content: this.content || null, tool_calls: toolCalls }
      : { role: "assistant", content: this.content };
  }
}
