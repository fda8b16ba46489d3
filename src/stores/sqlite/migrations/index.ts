/**
 * SQLite's schema versions in order, one file each (`NNN-<what>.ts`): entry `i` takes a database
 * from version `i` to `i + 1` (`PRAGMA user_version`), run by `openSqliteDatabase` in `sqlite/_schema.ts`.
 * Never edit a released one: a change is a new file and a new entry here.
 */
import { initialSchema } from "./001-initial.js";
import { fullTextAndQuarantine } from "./002-fulltext-quarantine.js";
import { porterStemming } from "./003-porter-stemming.js";
import { turnLeases } from "./004-turn-leases.js";
import { branchesAndOperations } from "./005-branches-operations.js";
import { messageVectors } from "./006-vectors.js";
import { scopedFullText } from "./007-scoped-fulltext.js";
import { leanAppend } from "./008-lean-append.js";
import { activitySeq } from "./009-activity-seq.js";
import { userMemories } from "./010-user-memories.js";
import { memoryVectors } from "./011-memory-vectors.js";
import { vectorLookup } from "./012-vector-lookup.js";

/** One forward step of the schema per entry, in order. */
export const SQLITE_MIGRATIONS: readonly string[] = [
  initialSchema,
  fullTextAndQuarantine,
  porterStemming,
  turnLeases,
  branchesAndOperations,
  messageVectors,
  scopedFullText,
  leanAppend,
  activitySeq,
  userMemories,
  memoryVectors,
  vectorLookup,
];
