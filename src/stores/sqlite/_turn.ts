/**
 * The SQLite store's turn: its lease (held in this process, or in the file when processes share it,
 * `crossProcessLease`) and the opening read of a turn, done in one synchronous step that nothing
 * interleaves (with the lease in the file, in the grant's own transaction).
 */
import type { AppendOptions, FullStore } from "../../core/types.js";
import { readTurn, withLease } from "../../core/open-turn.js";
import { HeldLeases } from "../_held-leases.js";
import { LocalLeases } from "../_lease.js";
import type { SqliteConnection } from "./_connection.js";
import { SqliteFileLeases, type TurnLeases } from "./_lease.js";

/** The turn leases of a store and what its writes and its turn methods do with them. */
export interface SqliteTurns {
  leases: TurnLeases;
  /** After a committed write with `releaseLease`: a file lease was given back in its transaction already. */
  releaseAfterWrite(id: string, write: AppendOptions): Promise<void>;
  methods: Pick<FullStore, "acquireLease" | "openTurn">;
}

/** The turn leases and turn methods over `conn`; in the file when `crossProcess`. */
export function sqliteTurns(conn: SqliteConnection, crossProcess: boolean): SqliteTurns {
  const { use, grouped, checkOpen } = conn;
  const leases: TurnLeases = crossProcess
    ? new SqliteFileLeases(
        (fn) => use((db) => fn(db.db)),
        (fn) => use((db) => db.tryWrite(() => fn(db.db))),
        (fn) => grouped((db) => fn(db.db)),
      )
    : new LocalLeases();
  const held = new HeldLeases();

  return {
    leases,

    releaseAfterWrite(id, write) {
      if (write.releaseLease && write.fence !== undefined) leases.releasedByWrite?.(id, write.fence);
      return held.releaseAfterWrite(id, write);
    },

    methods: {
      async acquireLease(id, lease) {
        checkOpen();
        return held.track(await leases.acquire(id, lease));
      },

      async openTurn(id, opening) {
        checkOpen();
        const read = () =>
          use((db) =>
            db.read(() => {
              const row = db.st.getSessionWithState.get(id);
              return readTurn(row ? db.session(row) : null, opening, (session) => ({
                status: "ok" as const,
                session,
                messages: opening.last > 0 ? db.messages(id, db.st.newest(id, Math.floor(opening.last)).reverse()) : [],
                summaries: db.summaries(id),
                state: db.stateOf(id, row!),
              }));
            }),
          );
        if (!leases.acquireAndRead) return withLease(held.track(await leases.acquire(id, opening.lease)), read);
        const granted = await leases.acquireAndRead(id, opening.lease, read);
        const outcome = granted.read!;
        return withLease(held.track(granted.lease), () => {
          if (!outcome.ok) throw outcome.error;
          return outcome.value;
        });
      },
    },
  };
}
