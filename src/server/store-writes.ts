/**
 * Whether the store has room for writes, as the turns' commits found it: a commit that failed for want
 * of space (`isStorageFull`: a full disk, a file-size limit or quota, Redis at `maxmemory`, PostgreSQL
 * `53100`) marks the store full until a commit succeeds. Reported by `/readyz` and as a gauge on `/metrics`.
 */
import { isStorageFull } from "../core/errors.js";

/** The store ran out of space: since when, and the store's error. */
export interface StorageFull {
  /** When the first commit failed for want of space (ms since the epoch). */
  since: number;
  /** The latest such failure's message. */
  error: string;
}

/** Tracks whether the store's last commit failed for want of space. */
export class StoreWrites {
  #full: StorageFull | undefined;

  /** A commit was stored: there is room again. */
  saved(): void {
    this.#full = undefined;
  }

  /** A commit failed; only a failure for want of space changes what is reported. */
  failed(error: unknown): void {
    if (!isStorageFull(error)) return;
    this.#full = { since: this.#full?.since ?? Date.now(), error: error.message };
  }

  /** Set while the last commit that reached a verdict failed for want of space. */
  get full(): StorageFull | undefined {
    return this.#full;
  }

  /** The `threadkeep_store_full` gauge in the Prometheus text format. */
  render(): string {
    return `# HELP threadkeep_store_full 1 while the store refuses writes for want of space (disk full, file-size limit or quota, Redis maxmemory, PostgreSQL disk_full), until a turn is saved again.\n# TYPE threadkeep_store_full gauge\nthreadkeep_store_full ${this.#full ? 1 : 0}`;
  }
}
