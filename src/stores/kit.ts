/**
 * `threadkeep/kit`: the tools for writing a store of your own (docs/custom-store.md). An application
 * needs none of this; it imports `threadkeep`. Here: the in-process turn lease with fences; the message
 * query, session paging and user-memory rules every built-in store applies the same way; the branch and
 * history plans of a document store; the relevance ranking of a store without a search index; the
 * capability guards; and `completeStore`, which fills in what a store leaves out.
 */
export { LocalLeases } from "./_lease.js";
export { applyMessageQuery, pageOwnerSessions, sessionFromInput, stampMessages } from "./_util.js";
export { checkSearchQuery, withinSeqBounds } from "../core/store/helpers.js";
export { applyMemoryPatch, memoryFromInput, pageUserMemories } from "../core/user-memories/store-helpers.js";
export { rankMemories } from "../core/user-memories/api.js";
export {
  rankByRelevance,
  rankByRelevanceInSlices,
  RELEVANCE_SLICE_MS,
  relevanceTerms,
  type SessionMessages,
} from "../core/store/relevance.js";
export { completeStore, DERIVED_SEARCH_BOUNDS, openTurn } from "../core/store/complete.js";
export {
  canStoreMemoryVectors,
  canStoreVectors,
  hasBranches,
  hasCombinedTurn,
  hasCounts,
  hasMemoryOwners,
  hasRangeReads,
  hasRetention,
  hasSearch,
  hasSessionBatchReads,
  hasState,
  hasSummaries,
  hasUserMemories,
} from "../core/types.js";
export {
  applyBranchSwitch,
  applyHistoryWrite,
  branchFromRecord,
  checkHistoryOptions,
  planBranchSwitch,
  planHistoryWrite,
} from "./history.js";
export type { BranchSwitchPlan, HistoryData, HistoryWritePlan, OperationRecord } from "./history.js";
