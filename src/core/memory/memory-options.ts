import type { CompactionOptions } from "../context/compaction.js";
import type { Summarizer } from "../context/summarize.js";
import type { ContextPreferences, PreloadedTurn } from "../context/types.js";
import type { ResolverOptions } from "../state/references.js";
import type { Embedder, EmbeddingOptions } from "../embeddings.js";
import type { MemoryContextOptions } from "../context/user-memories.js";
import type { RecallOptions } from "../context/recall.js";
import type { BranchInput, ChatMessage, Session, SessionStore } from "../types.js";

/** Options of {@link Memory.addMessages}. */
export interface AddMessagesOptions extends OwnerOptions {
  /** The fence of the turn lease the caller holds. */
  fence?: number;
  /** The session record, when the caller resolved it already this turn. */
  session?: Session;
  /** Makes the write idempotent: the same id applied again stores nothing more (see `AppendOptions.operationId`). */
  operationId?: string;
  /**
   * With `fence`, inside {@link Memory.runTurn}: the write is the turn's last, so it also releases
   * the turn lease, in the same round trip where the store allows (`capabilities.combinedTurn`).
   * The lease's heartbeat stops before the write.
   */
  releaseLease?: boolean;
}

/** Options of {@link Memory.replaceAfter}. */
export interface ReplaceAfterOptions extends AddMessagesOptions {
  /** Apply only if the session's last seq is this one; otherwise `history_conflict`. */
  expectedLastSeq?: number;
  /** Keep the replaced messages as a branch (`regenerate`, `edit`, `fork`) instead of dropping them. */
  branch?: BranchInput;
}

/** Options of `createMemory`. */
export interface MemoryOptions {
  /** A store, or a store URL (`memory:`, `file:./data`, `sqlite:./data/threadkeep.db`, `postgres://…`, `redis://…`) that `createMemory` opens. */
  store: SessionStore | string;
  /** Recent messages sent back to the model. @default 20 */
  window?: number;
  /** Token budget of history + new input. @default 8000 */
  tokenBudget?: number;
  /** Messages kept per session; older ones are dropped (after being summarized, with a summarizer). @default 200 */
  maxMessages?: number;
  /**
   * Inactivity expiry: a session inactive this long is gone at once, for every call (not listed,
   * searched or read; an append starts a new, empty session under its id), before `expire()` (or the
   * sweep, `sweepIntervalMs`) deletes its data. @default 7 days; 30 minutes on the in-memory store
   */
  ttlMs?: number;
  /** Run `expire()` this often in the background (never keeps the process alive). 0 disables. @default 0 */
  sweepIntervalMs?: number;
  /** Owner of sessions when a call names none. @default "default" */
  defaultUserId?: string;
  /**
   * Lifetime of a turn's lease, renewed by a heartbeat while the turn runs: how long a crashed holder
   * (or a release the store missed) can keep its session from the next turn. @default 10000
   */
  leaseTtlMs?: number;
  /** How long a turn waits for the turns ahead of it before failing with `session_busy`. @default 60000 */
  turnWaitMs?: number;
  /**
   * Summarises older messages (e.g. `createSummarizer({ baseUrl, model })`). Without one
   * nothing is summarised and the message cap drops the oldest; with one, it drops only summarised messages.
   */
  summarizer?: Summarizer;
  /** When older messages are summarised (with a summarizer). @default { threshold: 20, maxBatch: 100, background: false } */
  compaction?: CompactionOptions;
  /** Phrase lists of {@link Memory.resolve}. @default English and Dutch built in */
  resolver?: ResolverOptions;
  /** Tell the model the conversational state ("Recently referenced: task 42") in a system note. @default true */
  stateNote?: boolean;
  /**
   * Embeds messages in the background after each append (e.g. `createEmbedder({ baseUrl, model })`),
   * for semantic and hybrid search and recall. Off without one. The store must keep vectors.
   */
  embedder?: Embedder;
  /** Batching and retries of background embedding. @default { batchSize: 64, retryDelayMs: 5000 } */
  embedding?: EmbeddingOptions;
  /** Recall of relevant older messages into the context (with an embedder). @default { enabled: true, limit: 3, minScore: 0.3 } */
  recall?: RecallOptions;
  /** The user's memories in each turn's context, within a share of the token budget. @default { enabled: true, share: 0.1, limit: 200 } */
  memoryContext?: MemoryContextOptions;
}

/** What a {@link Memory} is built from: {@link MemoryOptions} with the store opened, or being opened, by `createMemory`. */
export interface MemoryInit extends Omit<MemoryOptions, "store"> {
  store: SessionStore | Promise<SessionStore>;
}

/** Whose session an operation concerns. */
export interface OwnerOptions {
  /** @default the memory's `defaultUserId` */
  userId?: string;
}

/** Options of {@link Memory.buildContext}. */
export interface BuildContextOptions extends OwnerOptions {
  /** The new messages of this turn. */
  input?: ChatMessage[];
  /** System messages to put first (the request's, or the application's). */
  system?: ChatMessage[];
  /** Model name, for token counting. */
  model?: string;
  window?: number;
  tokenBudget?: number;
  /** Apply these instead of the stored preferences (which are then left as they are). */
  preferences?: ContextPreferences;
  /** The session record, when the caller resolved it already this turn (saves a store read). */
  session?: Session;
  /** Use the stored history only up to this seq (a turn that replaces what follows it). */
  upToSeq?: number;
  /** Summaries of seqs before this one are of a superseded line. @default the session's (see `core/reconcile.ts`) */
  historyStartsAt?: number;
  /** The time confirmations are checked against. @default Date.now() */
  now?: number;
  /** What {@link Memory.runTurn} read with the lease (`preload`): used instead of reading again where it covers the window. */
  preloaded?: PreloadedTurn;
}

/** Options of {@link Memory.runTurn}. */
export interface RunTurnOptions extends OwnerOptions {
  /** How long to wait for the turns ahead. @default `turnWaitMs` */
  waitMs?: number;
  /** The lease's lifetime (renewed while the turn runs). @default `leaseTtlMs` */
  ttlMs?: number;
  /**
   * Read the session's context for this owner (`userId`) together with the lease, in one round trip
   * where the store allows, and hand it to `fn` ({@link PreloadedTurn}). Another owner's session is
   * then `session_not_found` before `fn` runs; an expired one is deleted and reads as new.
   */
  preload?: boolean;
}

/** The resolved settings of a {@link Memory}. */
export interface MemorySettings {
  window: number;
  tokenBudget: number;
  maxMessages: number;
  ttlMs: number;
  defaultUserId: string;
  leaseTtlMs: number;
  turnWaitMs: number;
  compaction: Required<Omit<CompactionOptions, "hardCap">> & Pick<CompactionOptions, "hardCap">;
  stateNote: boolean;
}
