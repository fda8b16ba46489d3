import { ThreadkeepError } from "../core/errors.js";

/** Where an OpenAI-compatible API lives. */
export interface UpstreamOptions {
  /** Base URL including the version path, e.g. `http://127.0.0.1:11434/v1`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer …` when set. */
  apiKey?: string;
  /** Gives up on a request (not a stream already flowing) after this long. @default 120000 */
  timeoutMs?: number;
}

/** The upstream answered with an error status; its status and body are kept to pass back. */
export class UpstreamError extends ThreadkeepError {
  /** The upstream's HTTP status (0 when it could not be reached). */
  readonly upstreamStatus: number;
  /** The upstream's error body, parsed when it was JSON. */
  readonly upstreamBody: unknown;

  constructor(upstreamStatus: number, upstreamBody: unknown, message: string, options: { cause?: unknown } = {}) {
    super("upstream_error", message, options);
    this.upstreamStatus = upstreamStatus;
    this.upstreamBody = upstreamBody;
  }
}

/** One Server-Sent Event of a streamed chat completion. */
export interface StreamEvent {
  /** The `data:` payload as received (forwarded verbatim by the proxy). */
  data: string;
  /** The parsed chunk, or null for `[DONE]` and unparseable data. */
  chunk: any;
}

/** A client for the parts of the OpenAI API threadkeep uses. */
export interface Upstream {
  readonly baseUrl: string;
  /** POST /chat/completions without streaming. @throws UpstreamError */
  chat(body: Record<string, unknown>, options?: { signal?: AbortSignal }): Promise<any>;
  /** POST /chat/completions with `stream: true`; yields events as they arrive. @throws UpstreamError before the first event */
  streamChat(body: Record<string, unknown>, options?: { signal?: AbortSignal }): Promise<AsyncIterable<StreamEvent>>;
  /** POST /embeddings. @throws UpstreamError */
  embeddings(input: string[], model: string, options?: { signal?: AbortSignal }): Promise<number[][]>;
  /** GET /models. @throws UpstreamError */
  models(options?: { signal?: AbortSignal }): Promise<any>;
}

async function readBody(response: Response): Promise<unknown> {
  const text = await response.text();
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
async function* sseData(body: ReadableStream<Uint8Array>): AsyncIterable<string> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of body as unknown as AsyncIterable<Uint8Array>) {
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

/** Creates a client for an OpenAI-compatible API (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, …). */
export function createUpstream(options: UpstreamOptions): Upstream {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? 120_000;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;

  const request = async (method: string, path: string, body: unknown, signal?: AbortSignal): Promise<Response> => {
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      return await fetch(`${baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      const reason = timeout.aborted ? `timed out after ${timeoutMs} ms` : String((error as Error).cause ?? error);
      throw new UpstreamError(
        0,
        { error: { message: `Upstream ${baseUrl} unreachable: ${reason}`, type: "upstream_error", code: "upstream_unreachable" } },
        `Upstream ${baseUrl} unreachable: ${reason}`,
        { cause: error },
      );
    }
  };

  const json = async (method: string, path: string, body?: unknown, signal?: AbortSignal) => {
    const response = await request(method, path, body, signal);
    const parsed = await readBody(response);
    if (!response.ok) throw new UpstreamError(response.status, parsed, errorMessage(response.status, parsed));
    return parsed as any;
  };

  return {
    baseUrl,
    chat: (body, opts = {}) => json("POST", "/chat/completions", { ...body, stream: false }, opts.signal),
    async streamChat(body, opts = {}) {
      const response = await request("POST", "/chat/completions", { ...body, stream: true }, opts.signal);
      if (!response.ok || !response.body) {
        const parsed = await readBody(response);
        throw new UpstreamError(response.status, parsed, errorMessage(response.status, parsed));
      }
      const stream = response.body;
      return (async function* () {
        for await (const data of sseData(stream)) {
          let chunk: any = null;
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
      const result = await json("POST", "/embeddings", { input, model }, opts.signal);
      return (result.data as { index: number; embedding: number[] }[])
        .sort((a, b) => a.index - b.index)
        .map((d) => d.embedding);
    },
    models: (opts = {}) => json("GET", "/models", undefined, opts.signal),
  };
}

/** Accumulates streamed chunks into the assistant message they spell. */
export class StreamAccumulator {
  content = "";
  #toolCalls: { id?: string; type?: string; function: { name: string; arguments: string } }[] = [];
  finishReason: string | null = null;
  model?: string;
  id?: string;

  add(chunk: any): void {
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
  message(): { role: "assistant"; content: string | null; tool_calls?: any[] } {
    const toolCalls = this.#toolCalls.filter(Boolean).map((c) => ({ id: c.id ?? "", type: c.type ?? "function", function: c.function }));
    return toolCalls.length > 0
      ? { role: "assistant", content: this.content || null, tool_calls: toolCalls }
      : { role: "assistant", content: this.content };
  }
}
