/**
 * PostgreSQL's schema versions in order, one file each (`NNN-<what>.ts`), applied by `migrate` in
 * `postgres/_schema.ts`. Never edit a released one, not even its indentation: a change is a new file
 * and a new entry here.
 */
import type { PgTx } from "../_client.js";
import { migrateInitial } from "./001-initial.js";
import { migrateAppendQueue } from "./002-append-queue.js";
import { migrateSettings } from "./003-settings.js";
import { migrateHistory } from "./004-history.js";
import { migrateVectors } from "./005-vectors.js";
import { migrateLeaseHolders } from "./006-lease-holders.js";
import { migrateTurnRead } from "./007-turn-read.js";
import { migrateTurnRelease } from "./008-turn-release.js";
import { migrateSummaryCap } from "./009-summary-cap.js";
import { migrateHeldWrites } from "./010-held-writes.js";
import { migrateAppendCapGuard } from "./011-append-cap-guard.js";
import { migrateDeferredIndexing } from "./012-deferred-indexing.js";
import { migrateFencedAppend } from "./013-fenced-append.js";
import { migrateTurnDoc } from "./014-turn-doc.js";
import { migrateScopedAppend } from "./015-scoped-append.js";
import { migrateHardCap } from "./016-hard-cap.js";
import { migrateUserMemories } from "./017-user-memories.js";
import { migrateMemoryVectors } from "./018-memory-vectors.js";
import { migrateTermStats } from "./019-term-stats.js";
import { migrateVectorCells } from "./020-vector-cells.js";
import { migrateLeanTurns } from "./021-lean-turns.js";
import { migrateKeyedTurns } from "./022-keyed-turns.js";

/** One forward step: `up` takes the schema from `version - 1` to `version`, in the migrating transaction. */
export interface Migration {
  version: number;
  up: (tx: PgTx) => Promise<void>;
}

/**
 * Forward migrations, applied in order. Timestamps are milliseconds since the epoch (`bigint`),
 * exactly what the contract speaks, taken from the server's clock so that several processes agree.
 * JSON is kept as `text`: `jsonb` cannot hold `\u0000` and reorders keys, and the store never queries
 * inside it.
 */
export const MIGRATIONS: readonly Migration[] = [
  { version: 1, up: migrateInitial },
  { version: 2, up: migrateAppendQueue },
  { version: 3, up: migrateSettings },
  { version: 4, up: migrateHistory },
  { version: 5, up: migrateVectors },
  { version: 6, up: migrateLeaseHolders },
  { version: 7, up: migrateTurnRead },
  { version: 8, up: migrateTurnRelease },
  { version: 9, up: migrateSummaryCap },
  { version: 10, up: migrateHeldWrites },
  { version: 11, up: migrateAppendCapGuard },
  { version: 12, up: migrateDeferredIndexing },
  { version: 13, up: migrateFencedAppend },
  { version: 14, up: migrateTurnDoc },
  { version: 15, up: migrateScopedAppend },
  { version: 16, up: migrateHardCap },
  { version: 17, up: migrateUserMemories },
  { version: 18, up: migrateMemoryVectors },
  { version: 19, up: migrateTermStats },
  { version: 20, up: migrateVectorCells },
  { version: 21, up: migrateLeanTurns },
  { version: 22, up: migrateKeyedTurns },
];
