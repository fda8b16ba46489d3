import { describe, expect, it } from "vitest";
import type { PgSql } from "./_client.js";
import { tryLease } from "./_lease-statements.js";
import { type TurnReadArgs, turnDocColumn } from "./_turn.js";

/** A stand-in for the driver's tag: what a statement (or fragment) is made of, with `$` for each value. */
interface Captured {
  text: string;
  values: unknown[];
}
const capture = ((strings: TemplateStringsArray, ...values: unknown[]): Captured => ({
  text: strings.join("$"),
  values,
})) as unknown as PgSql;

/** The `threadkeep_turn_doc(…) AS turn` call of a statement, blanks collapsed, and the values it binds. */
function turnDocCall(captured: Captured) {
  const parts = captured.text.split("$");
  const start = captured.text.indexOf("threadkeep_turn_doc(");
  const end = captured.text.indexOf("AS turn", start) + "AS turn".length;
  expect(start).toBeGreaterThanOrEqual(0);
  // The values bound between start and end: those whose placeholder falls in the call.
  let at = 0;
  const values: unknown[] = [];
  parts.forEach((part, i) => {
    at += part.length;
    if (i < captured.values.length && at >= start && at < end) values.push(captured.values[i]);
    at += 1;
  });
  return { call: captured.text.slice(start, end).replace(/\s+/g, " "), values };
}

describe("the turn's read in the lease's statements", () => {
  it("calls threadkeep_turn_doc in the first try (written out) exactly as the fragment the others use", () => {
    const reads: TurnReadArgs[] = [
      { userId: "u", last: 20 },
      { userId: "u2", activeSince: 1_700_000_000_123.7, last: 7.9 },
      { userId: "u3", activeSince: 5, last: -3 },
    ];
    for (const read of reads) {
      const written = tryLease(capture, "s1", { ttlMs: 30_000, token: "t", read }) as unknown as Captured;
      const fragment = turnDocColumn(capture, "s1", read) as unknown as Captured;
      expect(turnDocCall(fragment).values).toHaveLength(4);
      expect(turnDocCall(written)).toEqual(turnDocCall(fragment));
    }
  });
});
