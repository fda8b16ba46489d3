/**
 * `createMemory`, the library's entry point. A store URL is opened here, above core, so that a
 * {@link Memory} only ever holds a `SessionStore` and core never imports a backend.
 */
import { ThreadkeepError } from "./core/errors.js";
import { Memory, type MemoryOptions } from "./core/memory/memory.js";
import { DEFAULTS } from "./core/policies.js";
import { createStore } from "./stores/url.js";

/**
 * Creates the {@link Memory} that keeps conversations. A store URL (`sqlite:./data/threadkeep.db`, …)
 * is opened on first use; a failure to open it is reported by the first call that needs the store.
 * @example
 * ```ts
 * import { createMemory } from "threadkeep";
 *
 * const memory = createMemory({ store: "sqlite:./data/threadkeep.db" });
 * const chat = memory.session("chat-1", { userId: "alice" });
 * await chat.addMessage({ role: "user", content: "Hello" });
 * const { messages } = await chat.context({ model: "gpt-4o-mini" });
 * ```
 */
export function createMemory(options: MemoryOptions): Memory {
  if (!options || (typeof options.store !== "string" && typeof options.store?.appendMessages !== "function")) {
    throw new ThreadkeepError(
      "invalid_request",
      "createMemory needs a store: a SessionStore or a URL such as sqlite:./data/threadkeep.db",
    );
  }
  const { store } = options;
  if (typeof store !== "string") return new Memory({ ...options, store });
  // The in-memory store keeps sessions for a shorter time by default: they live in the process.
  const ttlMs = options.ttlMs ?? (store.startsWith("memory:") ? DEFAULTS.memoryTtlMs : undefined);
  return new Memory({ ...options, ttlMs, store: createStore(store, { ttlMs: options.ttlMs }) });
}
