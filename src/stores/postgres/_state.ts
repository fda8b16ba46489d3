/** The PostgreSQL store's conversational state: one versioned JSON document per session, set by compare-and-swap. */
import { SessionNotFoundError, StateConflictError } from "../../core/errors.js";
import type { SessionState, FullStore } from "../../core/types.js";
import type { PgRun } from "./_operations.js";
import type { PgSql } from "./_client.js";

/** The state methods of the store. */
export function stateMethods(run: PgRun): Pick<FullStore, "getState" | "setState"> {
  const stateOf = async (sql: PgSql, id: string): Promise<SessionState | null> => {
    const [row] = await sql<{ version: number | null; data: string | null }[]>`
      SELECT st.version, st.data FROM sessions s LEFT JOIN session_state st ON st.session_id = s.id WHERE s.id = ${id}`;
    if (!row) return null;
    return row.version === null ? { version: 0, data: {} } : { version: row.version, data: JSON.parse(row.data!) };
  };

  return {
    getState: (id) =>
      run("getState", async (sql) => {
        const state = await stateOf(sql, id);
        if (!state) throw new SessionNotFoundError(id);
        return state;
      }),

    setState: (id, data, expectedVersion) =>
      run("setState", async (sql) => {
        const json = JSON.stringify(data);
        // Version 0 means "no row yet": the insert that wins the primary key is the one CAS that succeeds.
        const rows =
          expectedVersion === 0
            ? await sql<{ version: number }[]>`
                INSERT INTO session_state (session_id, version, data) VALUES (${id}, 1, ${json})
                ON CONFLICT (session_id) DO NOTHING RETURNING version`
            : await sql<{ version: number }[]>`
                UPDATE session_state SET version = version + 1, data = ${json}
                WHERE session_id = ${id} AND version = ${expectedVersion} RETURNING version`;
        if (rows.length > 0) return { version: rows[0].version, data: JSON.parse(json) };
        const actual = await stateOf(sql, id);
        if (!actual) throw new SessionNotFoundError(id);
        throw new StateConflictError(expectedVersion, actual.version);
      }),
  };
}
