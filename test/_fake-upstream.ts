/**
 * A small fake OpenAI-compatible upstream on 127.0.0.1 that records every request it receives, so a
 * test can prove which history reached "the model". It answers chat completions (plain and streamed)
 * and embeddings; a test can script replies, errors and delays.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One request the fake received. */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: any;
}

/** What the fake answers to one chat request. */
export interface FakeReply {
  /** Assistant text. Default: `echo: <last user message text>`. */
  content?: string;
  /** Assistant tool calls instead of (or with) content. */
  tool_calls?: unknown[];
  /** Answer with this HTTP status and an OpenAI error body instead. */
  status?: number;
  error?: { message: string; type?: string; code?: string };
  /** Wait this long before answering (and between stream chunks when streaming). */
  delayMs?: number;
  /** Extra response headers (`retry-after`, `x-ratelimit-*`, `x-request-id`, …). */
  headers?: Record<string, string>;
  /**
   * Accept the request and never finish it: `before-head` sends nothing at all; `mid-stream` (a
   * streamed request) sends the head and the first chunk of content, then nothing. The connection
   * stays open until the client gives up or the fake closes.
   */
  hang?: "before-head" | "mid-stream";
  /**
   * Streamed: awaited before each piece of content is sent (`index` from 0), e.g. until the client
   * holds the pieces before it, so a test can prove each one was forwarded without timing anything.
   */
  beforePiece?: (index: number) => Promise<unknown>;
}

export interface FakeUpstream {
  /** Base URL including `/v1`, e.g. `http://127.0.0.1:43123/v1`. */
  url: string;
  requests: RecordedRequest[];
  /** Chat requests only. */
  chatRequests(): RecordedRequest[];
  /** Makes /v1/embeddings answer 503 (true) or work again (false). */
  setEmbeddingsDown(down: boolean): void;
  /** Embedding requests only. */
  embeddingRequests(): RecordedRequest[];
  /** Decides the reply of each chat request; replaces the default echo. */
  setReply(fn: (body: any, index: number) => FakeReply | Promise<FakeReply>): void;
  /** The model ids `GET /models` lists; null answers 404 (an upstream without the route). @default ["fake-model", "fake/large"] */
  setModels(ids: string[] | null): void;
  close(): Promise<void>;
}

function lastUserText(body: any): string {
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role !== "user") continue;
    if (typeof m.content === "string") return m.content;
    if (Array.isArray(m.content)) return m.content.map((p: any) => p?.text ?? "").join("");
  }
  return "";
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The fake's embedding model: words of one synonym group share a dimension, so related words are
 * close ("automobile" near "car") and unrelated ones far; any other word adds a little to one of
 * a few hashed dimensions, so texts still differ. Deterministic, 16 dimensions.
 */
export const SYNONYM_GROUPS: readonly (readonly string[])[] = [
  ["car", "cars", "automobile", "vehicle", "truck", "sedan", "drive", "driving", "mechanic", "garage"],
  ["grocery", "groceries", "supermarket", "food", "milk", "bread", "vegetables", "shopping"],
  ["dog", "dogs", "puppy", "cat", "kitten", "pet", "pets", "vet", "veterinarian"],
  ["invoice", "bill", "payment", "pay", "money", "budget", "salary", "bank"],
  ["flight", "plane", "airport", "trip", "vacation", "travel", "holiday", "hotel"],
  ["doctor", "medicine", "sick", "headache", "hospital", "health", "fever"],
  ["guitar", "piano", "song", "music", "concert", "band"],
  ["rain", "sunny", "weather", "forecast", "umbrella", "storm"],
];
const HASHED_DIMS = 8;

export function fakeEmbedding(text: string): number[] {
  const vector = new Array(SYNONYM_GROUPS.length + HASHED_DIMS).fill(0);
  for (const word of text
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 2)) {
    const group = SYNONYM_GROUPS.findIndex((g) => g.includes(word));
    if (group >= 0) {
      vector[group] += 1;
      continue;
    }
    let hash = 0;
    for (const ch of word) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
    vector[SYNONYM_GROUPS.length + (hash % HASHED_DIMS)] += 0.15;
  }
  return vector;
}

/** Starts the fake on an ephemeral port of 127.0.0.1. */
export async function startFakeUpstream(): Promise<FakeUpstream> {
  const requests: RecordedRequest[] = [];
  let chatIndex = 0;
  let embeddingsDown = false;
  let modelIds: string[] | null = ["fake-model", "fake/large"];
  let replyFn: (body: any, index: number) => FakeReply | Promise<FakeReply> = (body) => ({
    content: `echo: ${lastUserText(body)}`,
  });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString();
    let body: any;
    try {
      body = raw ? JSON.parse(raw) : null;
    } catch {
      body = raw;
    }
    const path = (req.url ?? "").split("?")[0];
    requests.push({ method: req.method ?? "", path, headers: req.headers, body });

    if (path.endsWith("/embeddings")) {
      if (embeddingsDown) {
        res.writeHead(503, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "embeddings are down", type: "server_error", code: null } }));
        return;
      }
      const inputs: string[] = Array.isArray(body?.input) ? body.input : [body?.input ?? ""];
      const data = inputs.map((text, index) => ({
        object: "embedding",
        index,
        embedding: fakeEmbedding(String(text)),
      }));
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          object: "list",
          data,
          model: body?.model ?? "fake",
          usage: { prompt_tokens: 1, total_tokens: 1 },
        }),
      );
      return;
    }
    if (path.endsWith("/models") && req.method === "GET" && modelIds) {
      const data = modelIds.map((id) => ({ id, object: "model", created: 1700000000, owned_by: "fake" }));
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data }));
      return;
    }
    if (!path.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(
        JSON.stringify({ error: { message: `no route ${path}`, type: "invalid_request_error", code: "not_found" } }),
      );
      return;
    }

    const reply = await replyFn(body, chatIndex++);
    if (reply.hang === "before-head") return;
    if (reply.delayMs) await sleep(reply.delayMs);
    if (reply.status && reply.status >= 400) {
      res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
      res.end(JSON.stringify({ error: { type: "invalid_request_error", code: null, ...reply.error } }));
      return;
    }
    const content = reply.content ?? (reply.tool_calls ? null : `echo: ${lastUserText(body)}`);
    const id = `chatcmpl-fake-${chatIndex}`;
    const created = Math.floor(Date.now() / 1000);
    const model = body?.model ?? "fake-model";
    if (body?.stream) {
      res.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        connection: "keep-alive",
        ...reply.headers,
      });
      const send = (delta: Record<string, unknown>, finish: string | null) =>
        res.write(
          `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`,
        );
      send({ role: "assistant", content: "" }, null);
      const pieces = (content ?? "").match(/.{1,4}/gs) ?? [];
      for (const [index, piece] of pieces.entries()) {
        await reply.beforePiece?.(index);
        if (res.destroyed) return;
        send({ content: piece }, null);
        if (reply.hang === "mid-stream") return;
        if (reply.delayMs) await sleep(reply.delayMs);
      }
      if (reply.tool_calls) send({ tool_calls: reply.tool_calls.map((c: any, index) => ({ index, ...c })) }, null);
      send({}, reply.tool_calls ? "tool_calls" : "stop");
      if (body?.stream_options?.include_usage) {
        res.write(
          `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } })}\n\n`,
        );
      }
      res.end("data: [DONE]\n\n");
      return;
    }
    res.writeHead(200, { "content-type": "application/json", ...reply.headers });
    res.end(
      JSON.stringify({
        id,
        object: "chat.completion",
        created,
        model,
        choices: [
          {
            index: 0,
            message: { role: "assistant", content, ...(reply.tool_calls ? { tool_calls: reply.tool_calls } : {}) },
            finish_reason: reply.tool_calls ? "tool_calls" : "stop",
          },
        ],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      }),
    );
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error) => {
      res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: String(error), type: "server_error" } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    chatRequests: () => requests.filter((r) => r.path.endsWith("/chat/completions")),
    embeddingRequests: () => requests.filter((r) => r.path.endsWith("/embeddings")),
    setEmbeddingsDown(down) {
      embeddingsDown = down;
    },
    setReply(fn) {
      replyFn = fn;
    },
    setModels(ids) {
      modelIds = ids;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
