/** The SQLite store's summaries: saved into the session they name, listed in order. */
import type { FullStore } from "../../core/types.js";
import type { SqliteConnection } from "./_connection.js";

/** The summary methods of the store. */
export function summaryMethods({ use }: SqliteConnection): Pick<FullStore, "saveSummary" | "listSummaries"> {
  return {
    async saveSummary(id, input) {
      return use((db) => db.tx.saveSummary(id, input));
    },

    async listSummaries(id) {
      return use((db) => db.summaries(id));
    },
  };
}
