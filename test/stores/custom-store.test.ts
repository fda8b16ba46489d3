import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { runStoreConformance } from "../../src/testing/index.js";
import { createKeyValueStore, mapKeyValue } from "./_kv-store.js";

// One database for every store the suite opens, so a reopen and a second "process" see the same data.
const db = mapKeyValue();
runStoreConformance("key-value (third-party)", () => createKeyValueStore(db));

/** A fixture's source as a user writes it: the package entries instead of the repository's files. */
const asUser = (source: string) =>
  source.replace('"../../src/index.js"', '"threadkeep"').replace('"../../src/stores/kit.js"', '"threadkeep/kit"');

describe("docs/custom-store.md", () => {
  it("shows the store above in full, as a user imports it", async () => {
    const doc = await readFile(new URL("../../docs/custom-store.md", import.meta.url), "utf8");
    const source = await readFile(new URL("./_kv-store.ts", import.meta.url), "utf8");
    const example = doc.split("## A complete example: every capability")[1].split("```ts\n")[1].split("```\n")[0];
    expect(example).toBe(asUser(source));
  });

  it("shows the minimal store in full, as a user imports it", async () => {
    const doc = await readFile(new URL("../../docs/custom-store.md", import.meta.url), "utf8");
    const source = await readFile(new URL("../fixtures/minimal-store.ts", import.meta.url), "utf8");
    const example = doc.split("## A minimal store")[1].split("```ts\n")[1].split("```\n")[0];
    expect(example).toBe(asUser(source));
  });
});
