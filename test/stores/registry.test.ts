/**
 * The built-in stores are one list, `STORES` (src/stores/url.ts): the URL parser resolves from it, and
 * package.json's subpaths and the README's store table follow it. A store added, renamed or dropped in
 * one place and not the others fails here.
 */
import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { createStore, STORE_SCHEMES, STORES } from "../../src/stores/url.js";

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");
const pkg = JSON.parse(read("package.json")) as {
  exports: Record<string, { types: string; import: string } | string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
};

/** The rows of the README's store table: its URL column and the rest of the row. */
function readmeStoreRows(): { url: string; row: string }[] {
  const section = read("README.md").split("<!-- section:stores -->")[1].split("<!-- section:end stores -->")[0];
  return section
    .split("\n")
    .filter((line) => line.startsWith("| `"))
    .map((row) => ({ url: /^\| `([^`]+)`/.exec(row)![1], row }));
}

describe("STORES", () => {
  it("gives each scheme to one store", () => {
    expect(new Set(STORE_SCHEMES).size).toBe(STORE_SCHEMES.length);
    for (const a of STORE_SCHEMES) {
      for (const b of STORE_SCHEMES) if (a !== b) expect(b.startsWith(a), `${a} shadows ${b}`).toBe(false);
    }
  });

  it("is what package.json publishes under ./stores/", () => {
    const published = Object.keys(pkg.exports).filter((key) => key.startsWith("./stores/"));
    expect(published.sort()).toEqual(STORES.map((store) => `./stores/${store.name}`).sort());
    for (const store of STORES) {
      expect(pkg.exports[`./stores/${store.name}`], store.name).toEqual({
        types: `./dist/${store.module}.d.ts`,
        import: `./dist/${store.module}.js`,
      });
      expect(existsSync(new URL(`../../src/${store.module}.ts`, import.meta.url)), store.module).toBe(true);
    }
  });

  it("names its optional clients as optional peer dependencies", () => {
    for (const store of STORES.filter((entry) => entry.peer)) {
      expect(pkg.peerDependencies[store.peer!], store.peer).toBeDefined();
      expect(pkg.peerDependenciesMeta[store.peer!]?.optional, store.peer).toBe(true);
    }
  });

  it("is the README's store table: a row per store, each row a store's URL, the peer to install named", () => {
    const rows = readmeStoreRows();
    for (const { url } of rows)
      expect(
        STORE_SCHEMES.some((scheme) => url.startsWith(scheme)),
        url,
      ).toBe(true);
    for (const store of STORES) {
      const own = rows.filter(({ url }) => store.schemes.some((scheme) => url.startsWith(scheme)));
      expect(own.length, `README rows for ${store.name}`).toBeGreaterThan(0);
      if (store.peer) expect(own[0].row, store.name).toContain(`npm install ${store.peer}`);
    }
  });

  it("opens each store its schemes name, and refuses others naming the forms it knows", async () => {
    const memory = await createStore("memory:");
    expect(memory.name).toBe("memory");
    await memory.close();
    await expect(createStore("mongodb://x")).rejects.toThrow(
      `use one of ${STORES.map((store) => store.hint).join(", ")}`,
    );
  });
});
