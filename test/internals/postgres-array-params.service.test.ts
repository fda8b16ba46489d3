/**
 * The array parameters threadkeep declares in place of the driver's type lookup (`serializeArray` and
 * `parseArray` in `postgres/_client.ts`) against PostgreSQL itself: random strings over the characters an
 * array literal treats specially (quotes, backslashes, braces, commas, blanks, the word NULL), empty
 * strings, nulls and unicode (astral characters included) go through a `text[]` parameter and back, both
 * as the array's text output and element by element, and come back equal.
 */
import { afterAll, describe, expect, it } from "vitest";
import { openClient, type PgClients } from "../../src/stores/postgres/_client.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";

const enabled = await serviceAvailable("postgres");

/** Deterministic, so a failure can be replayed (mulberry32). */
function random(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SPECIAL = [
  '"',
  "\\",
  "{",
  "}",
  ",",
  " ",
  "\t",
  "\n",
  "\r",
  "'",
  "NULL",
  "null",
  "$",
  "[",
  "]",
  ":",
  "=",
  "é",
  "€",
  "😀",
  "\u200b",
];

function randomString(next: () => number): string {
  const length = Math.floor(next() * 12);
  let out = "";
  for (let i = 0; i < length; i++) {
    const pick = next();
    if (pick < 0.6) out += SPECIAL[Math.floor(next() * SPECIAL.length)];
    else if (pick < 0.8) out += String.fromCharCode(0x20 + Math.floor(next() * 0x5f));
    // Any BMP code point but NUL (PostgreSQL text cannot hold it) and the lone surrogates (not UTF-8).
    else {
      const code = 1 + Math.floor(next() * 0xfffe);
      out += code >= 0xd800 && code <= 0xdfff ? "x" : String.fromCharCode(code);
    }
  }
  return out;
}

describe.skipIf(enabled !== true)("postgres: text[] parameters round-trip", () => {
  let clients: PgClients | undefined;
  afterAll(async () => {
    await clients?.end({ timeout: 5 });
  });

  it("gives back every string, empty string and null it was given", async () => {
    clients = await openClient(TEST_POSTGRES_URL, {
      poolSize: 1,
      connectTimeoutSeconds: 5,
      schema: "public",
      queryTimeoutMs: 30_000,
    });
    const sql = clients.main;
    const next = random(20261207);
    for (let round = 0; round < 200; round++) {
      const values: (string | null)[] = [];
      const count = Math.floor(next() * 8);
      for (let i = 0; i < count; i++) {
        const pick = next();
        values.push(pick < 0.1 ? null : pick < 0.2 ? "" : pick < 0.25 ? "NULL" : randomString(next));
      }
      const [row] = await sql<{ whole: (string | null)[]; n: number }[]>`
        SELECT ${values}::text[] AS whole, cardinality(${values}::text[]) AS n`;
      expect(row.whole, JSON.stringify(values)).toEqual(values);
      expect(row.n).toBe(values.length);
      const items = await sql<{ i: number; v: string | null }[]>`
        SELECT i::int AS i, v FROM unnest(${values}::text[]) WITH ORDINALITY AS u(v, i) ORDER BY i`;
      expect(
        items.map((item) => item.v),
        JSON.stringify(values),
      ).toEqual(values);
    }
  });
});
