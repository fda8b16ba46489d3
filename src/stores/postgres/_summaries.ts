/** The PostgreSQL store's summaries: saved into the session (incarnation) they name, listed in order. */
import { SessionNotFoundError } from "../../core/errors.js";
import type { FullStore, SummaryInput } from "../../core/types.js";
import type { PgRun } from "./_operations.js";
import { ms, type SummaryRow, toSummary } from "./_rows.js";

/** The summary methods of the store. */
export function summaryMethods(run: PgRun): Pick<FullStore, "saveSummary" | "listSummaries"> {
  return {
    saveSummary: (id: string, input: SummaryInput) =>
      run("saveSummary", async (sql) => {
        // Only into the session row it names (and of the incarnation it was made from, when given):
        // the row lock re-reads the latest version, so a session deleted meanwhile gives no row.
        const [row] = await sql<SummaryRow[]>`
          INSERT INTO summaries (session_id, from_seq, to_seq, created_at, content, metadata)
          SELECT s.id, ${input.fromSeq}, ${input.toSeq}, coalesce(${ms(input.createdAt)}::bigint, threadkeep_now_ms()),
                 ${input.content}, ${input.metadata === undefined ? null : JSON.stringify(input.metadata)}
          FROM sessions s
          WHERE s.id = ${id} AND (${ms(input.sessionCreatedAt)}::bigint IS NULL OR s.created_at = ${ms(input.sessionCreatedAt)}::bigint)
          FOR KEY SHARE
          RETURNING id, from_seq, to_seq, created_at, content, metadata`;
        if (!row) throw new SessionNotFoundError(id);
        return toSummary(row);
      }),

    listSummaries: (id) =>
      run("listSummaries", async (sql) => {
        const rows = await sql<SummaryRow[]>`
          SELECT id, from_seq, to_seq, created_at, content, metadata FROM summaries
          WHERE session_id = ${id} ORDER BY from_seq, id`;
        return rows.map(toSummary);
      }),
  };
}
