/** Opening the configured store for the commands that work on stored sessions directly. */
import type { Command } from "commander";
import type { FullStore } from "../core/types.js";
import { createStore } from "../stores/url.js";
import { DEFAULT_STORE_URL, resolveConfig } from "./options.js";

/** Adds `--store` alone (export, import, sessions): the window and budget flags mean nothing there. */
export function addStoreUrlOption(command: Command): Command {
  return command.option("--store <url>", `session store URL (env THREADKEEP_STORE; default ${DEFAULT_STORE_URL})`);
}

/**
 * Opens the store named by `--store` / `THREADKEEP_STORE` / the default, runs `fn`, and closes it.
 * No message cap and no owner check apply: these commands administer the store.
 */
export async function withStore<T>(
  flags: { store?: string; ttl?: string },
  fn: (store: FullStore) => Promise<T>,
): Promise<T> {
  const config = resolveConfig({ store: flags.store, ttl: flags.ttl });
  const store = await createStore(config.store, { ttlMs: config.ttlMs });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}
