/** PostgreSQL schema version 6, as released: never edited, not even its indentation; a change is a new version. */
import type { PgTx } from "../_client.js";

/** Schema version 6: the holder of a lease and of a queue ticket. */
export async function migrateLeaseHolders(tx: PgTx): Promise<void> {
  // Who a grant went to (a random token per waiter), so a waiter whose grant answer was lost in
  // an outage can give the lease back instead of leaving it to lapse.
  await tx`ALTER TABLE leases ADD COLUMN holder text`;
  await tx`ALTER TABLE lease_queue ADD COLUMN holder text`;
}
