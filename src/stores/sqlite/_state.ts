/** The SQLite store's conversational state: one versioned JSON document per session, set by compare-and-swap. */
import { SessionNotFoundError, StateConflictError } from "../../core/errors.js";
import type { FullStore } from "../../core/types.js";
import type { SqliteConnection } from "./_connection.js";

/** The state methods of the store. */
export function stateMethods({ use, change }: SqliteConnection): Pick<FullStore, "getState" | "setState"> {
  return {
    async getState(id) {
      return use((db) => db.state(id));
    },

    async setState(id, data, expectedVersion) {
      return change(({ st }) => {
        const json = JSON.stringify(data);
        if (st.setState.run(json, id, expectedVersion).changes === 0) {
          const row = st.getState.get(id);
          if (!row) throw new SessionNotFoundError(id);
          throw new StateConflictError(expectedVersion, row.state_version);
        }
        return { version: expectedVersion + 1, data: JSON.parse(json) };
      });
    },
  };
}
