/**
 * Every error code threadkeep can answer with is in docs/http-api.md's error table, with the status the
 * code maps to (src/core/errors.ts `ERROR_STATUS`): a code added without a row fails here.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ERROR_STATUS } from "../../src/core/errors.js";

describe("docs/http-api.md error table", () => {
  it("lists every coded error with its status", () => {
    const doc = readFileSync(new URL("../../docs/http-api.md", import.meta.url), "utf8");
    const section = doc.slice(doc.indexOf("\n## Errors"), doc.indexOf("\n## ", doc.indexOf("\n## Errors") + 1));
    const rows = Object.fromEntries(
      [...section.matchAll(/^\| (\d{3}) \| `(\w+)` \|/gm)].map((m) => [m[2], Number(m[1])]),
    );
    const documented = Object.fromEntries(Object.keys(ERROR_STATUS).map((code) => [code, rows[code]]));
    expect(documented).toEqual(ERROR_STATUS);
  });
});
