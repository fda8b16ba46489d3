/**
 * Starts threadkeep and a fake OpenAI-compatible upstream on 127.0.0.1 for a test, and hands out
 * official `openai` clients pointed at threadkeep.
 */
import OpenAI from "openai";
import type { Memory, MemoryOptions } from "../../src/core/memory/memory.js";
import { createMemory } from "../../src/create-memory.js";
import type { FullStore } from "../../src/core/types.js";
import { createServer, type ServerOptions, type ThreadkeepServer } from "../../src/server/index.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";

/** A running server + fake upstream. */
export interface Stack {
  fake: FakeUpstream;
  server: ThreadkeepServer;
  memory: Memory;
  /** Base URL of threadkeep, e.g. http://127.0.0.1:41234. */
  url: string;
  /** An openai client against threadkeep (`apiKey` is the threadkeep key when the server has keys). */
  client(apiKey?: string): OpenAI;
  /** fetch against threadkeep with a JSON body. */
  request(
    method: string,
    path: string,
    options?: { body?: unknown; headers?: Record<string, string> },
  ): Promise<Response>;
  close(): Promise<void>;
}

/** Options of {@link startStack}. */
export interface StackOptions extends Partial<Omit<ServerOptions, "memory">> {
  /** A store (default: a fresh in-memory store). */
  store?: FullStore | string;
  memoryOptions?: Partial<MemoryOptions>;
  /** Start without an upstream configured. */
  noUpstream?: boolean;
  /** The upstream client's timeout (`--upstream-timeout`). @default 120000 */
  upstreamTimeoutMs?: number;
}

/** Starts the stack on ephemeral ports. */
export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const fake = await startFakeUpstream();
  const { store, memoryOptions, noUpstream, upstreamTimeoutMs, ...serverOptions } = options;
  const memory = createMemory({ store: store ?? createMemoryStore(), ...memoryOptions });
  const server = await createServer({
    upstream: noUpstream
      ? undefined
      : { baseUrl: fake.url, apiKey: "sk-upstream-secret", timeoutMs: upstreamTimeoutMs },
    // Tests drive more turns per user than any chat does; those of the limits set them (fair-share.test.ts).
    fairShare: false,
    ...serverOptions,
    memory,
    port: 0,
  });
  const url = await server.listen();
  return {
    fake,
    server,
    memory,
    url,
    client: (apiKey = "sk-client-unused") => new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0 }),
    request: (method, path, opts = {}) =>
      fetch(`${url}${path}`, {
        method,
        headers: {
          ...(opts.body !== undefined ? { "content-type": "application/json" } : {}),
          ...opts.headers,
        },
        body:
          opts.body === undefined ? undefined : typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body),
      }),
    async close() {
      await server.close();
      await memory.close();
      await fake.close();
    },
  };
}

/** The text of the messages an upstream chat request carried, as `role: content` lines. */
export function transcript(body: { messages: { role: string; content: unknown }[] }): string[] {
  return body.messages.map(
    (m) => `${m.role}: ${typeof m.content === "string" ? m.content : JSON.stringify(m.content)}`,
  );
}
