/**
 * threadkeep: session memory for LLM chat applications. This entry is the application API: `Memory`
 * and what configures, feeds and reads it. The tools for writing a store of your own are at
 * `threadkeep/kit`; test/package/entry.test.ts keeps this entry at 70 runtime names or fewer.
 * This entry imports no optional client: stores that need `postgres` or `redis` load them on use.
 */
export { createMemory } from "./create-memory.js";
export { Memory } from "./core/memory/memory.js";
export { SessionHandle } from "./core/memory/memory.js";
export {
  MAX_MEMORIES_READ,
  MAX_MEMORY_ID_LENGTH,
  MAX_MEMORY_METADATA_LENGTH,
  MAX_MEMORY_TEXT_LENGTH,
  UserMemories,
} from "./core/user-memories/api.js";
export type { UserMemoryAdd, UserMemoryEdit, UserMemoryListOptions } from "./core/user-memories/api.js";
export type {
  AddMessagesOptions,
  BuildContextOptions,
  MemoryInit,
  MemoryOptions,
  MemorySettings,
  OwnerOptions,
  PreloadedTurn,
  ReplaceAfterOptions,
  RunTurnOptions,
} from "./core/memory/memory.js";
export type * from "./core/types.js";
export { BRANCH_REASONS, OPERATION_HISTORY, ROLES } from "./core/types.js";
export * from "./core/errors.js";
export { isValidSessionId, MAX_SESSION_ID_LENGTH, newSessionId, parseSessionId, scopedSessionId } from "./core/ids.js";
export { contentText, toChatMessage, validateMessage, validateMessages } from "./core/messages.js";
export { DEFAULTS } from "./core/policies.js";
export type { AssembledContext, ContextInput, ContextPreferences } from "./core/context/types.js";
export { assembleContext } from "./core/context/assemble.js";
export { createStore, STORE_SCHEMES } from "./stores/url.js";
export type { StoreUrlOptions } from "./stores/url.js";
export { createMemoryStore } from "./stores/in-process/index.js";
export type { MemoryStoreOptions } from "./stores/in-process/index.js";
export type { OmittedReasons } from "./core/context/types.js";
export { countContextTokens, encodingForModel, TokenCounter } from "./core/context/tokens.js";
export type { EncodingName } from "./core/context/tokens.js";
export {
  contextPreferencesSchema,
  handleSetContextPreferences,
  parseContextPreferences,
  SET_CONTEXT_PREFERENCES,
  setContextPreferencesTool,
} from "./core/context/preferences.js";
export type { PreferencesTarget } from "./core/context/preferences.js";
export { formatTranscript } from "./core/context/summarize.js";
export type { SummarizeRequest, Summarizer } from "./core/context/summarize.js";
export type { CompactionOptions, CompactionResult } from "./core/context/compaction.js";
export {
  conversationPatchSchema,
  conversationStateSchema,
  DEFAULT_CONFIRMATION_TTL_MS,
  MAX_REFERENCES,
  parseConversationPatch,
  parseConversationState,
  renderConversationNote,
} from "./core/state/conversation.js";
export type {
  ConversationPatch,
  ConversationState,
  EntityRef,
  Intent,
  PendingConfirmation,
  PendingInput,
} from "./core/state/conversation.js";
export { BUILTIN_PHRASES, createResolver, resolveMessage } from "./core/state/references.js";
export type { PhraseSet, Resolution, Resolver, ResolverOptions } from "./core/state/references.js";
export { createSummarizer, DEFAULT_SUMMARY_INSTRUCTIONS } from "./llm/summarizer.js";
export type { SummarizerOptions } from "./llm/summarizer.js";
export { createEmbedder } from "./llm/embedder.js";
export type { EmbedderOptions } from "./llm/embedder.js";
export type { Embedder, EmbeddingOptions } from "./core/embeddings.js";
export type { RecallOptions } from "./core/context/recall.js";
export { SEARCH_MODES } from "./core/search.js";
export type { HitNeighbour, RankedHit, SearchMode, SearchRanking } from "./core/search.js";
export { exportSessions } from "./transfer/export.js";
export type { ExportReport, ExportSelection } from "./transfer/export.js";
export { importSessions } from "./transfer/import.js";
export type { ImportOptions, ImportReport } from "./transfer/import.js";
export { migrateStores } from "./transfer/migrate.js";
export type { MigrateOptions, MigrateReport } from "./transfer/migrate.js";
export { bundleLines, EXPORT_FORMAT_VERSION, readExport } from "./transfer/jsonl-format.js";
export type { ExportItem, FormatProblem, SessionBundle } from "./transfer/jsonl-format.js";
