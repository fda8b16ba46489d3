/**
 * What export, import and migrate do with each capability of the store contract: one entry per
 * capability guard (`has…` of store-types.ts, `canStore…` of vector-types.ts). The table's type is
 * derived from those modules' exports, so a capability added to the contract without an entry here
 * does not compile, and the completeness test (test/transfer/completeness.service.test.ts) checks the same
 * at run time against the modules' exports and moves a fixture holding every kind of data.
 */
import type * as StoreTypes from "../core/store-types.js";
import type * as VectorTypes from "../core/vector-types.js";

/** The name of a capability guard of the contract. */
export type CapabilityGuard =
  Extract<keyof typeof StoreTypes, `has${string}`> | Extract<keyof typeof VectorTypes, `canStore${string}`>;

/** How a transfer treats what one capability keeps. */
export interface CapabilityTransfer {
  /**
   * `carried`: its data is in the JSONL format and copied by migrate; `derived`: its data is made again
   * from carried data on the target (see `how`); `behaviour`: the capability keeps no data of its own.
   */
  treatment: "carried" | "derived" | "behaviour";
  /** The record types of the format that hold it (for `carried`), or why nothing has to be carried. */
  how: string;
}

/** Every capability guard of the contract and how transfers treat it. */
export const CAPABILITY_TRANSFER: Record<CapabilityGuard, CapabilityTransfer> = {
  hasBranches: { treatment: "carried", how: "`branch` records: superseded messages with their split point" },
  hasSummaries: { treatment: "carried", how: "`summary` records, in original seq numbering" },
  hasState: { treatment: "carried", how: "`state` records: the state's data (versions restart on the target)" },
  hasUserMemories: { treatment: "carried", how: "`memory` records: text, times, source, metadata and history" },
  hasMemoryOwners: {
    treatment: "carried",
    how: "enumerates the users whose `memory` records a whole-store export writes",
  },
  hasRetention: {
    treatment: "behaviour",
    how: "enumerates the sessions a whole-store export writes; keeps nothing itself",
  },
  hasSearch: { treatment: "behaviour", how: "full-text indexes are rebuilt by the target from the messages" },
  hasCounts: { treatment: "behaviour", how: "counts are of the messages carried" },
  hasCombinedTurn: { treatment: "behaviour", how: "a faster way to open a turn; keeps nothing" },
  hasRangeReads: { treatment: "behaviour", how: "a faster way to read several ranges; keeps nothing" },
  hasSessionBatchReads: { treatment: "behaviour", how: "a faster way to read several sessions; keeps nothing" },
  canStoreVectors: {
    treatment: "derived",
    how: "message embeddings are not carried: `threadkeep reindex` (or the server's background embedding of new turns) embeds them on the target with its own model",
  },
  canStoreMemoryVectors: {
    treatment: "derived",
    how: "memory embeddings are not carried: the server embeds memories without a vector in the background on the target, with its own model",
  },
};
