/**
 * The CHANGELOG's newest entry names the store schema versions the code writes, so a migration added
 * without a line for it fails here (a store migrated by a release cannot be opened by an older one:
 * docs/versioning.md), and the package's version has an entry.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SCHEMA_VERSION } from "../../src/stores/postgres/_schema.js";
import { SQLITE_SCHEMA_VERSION } from "../../src/stores/sqlite/_schema.js";
import { FILE_FORMAT_VERSION } from "../../src/stores/file/_records.js";
import { EXPORT_FORMAT_VERSION } from "../../src/transfer/jsonl-format.js";

const changelog = readFileSync(new URL("../../CHANGELOG.md", import.meta.url), "utf8");
const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };

describe("CHANGELOG.md", () => {
  const newest = changelog.split(/^## /m)[1] ?? "";

  it("has an entry for the package's version, newest first", () => {
    expect(newest.split("\n")[0]).toMatch(new RegExp(`^${pkg.version.replace(/\./g, "\\.")}\\b`));
  });

  it("names the schema versions the stores write in its newest entry", () => {
    const stores =
      /^Stores: SQLite schema (\d+), PostgreSQL schema (\d+), JSONL file format (\d+); export format (\d+)\.$/m.exec(
        newest,
      );
    expect(
      stores,
      "the newest entry needs a line 'Stores: SQLite schema N, PostgreSQL schema N, JSONL file format N; export format N.'",
    ).not.toBeNull();
    expect(Number(stores![1])).toBe(SQLITE_SCHEMA_VERSION);
    expect(Number(stores![2])).toBe(SCHEMA_VERSION);
    expect(Number(stores![3])).toBe(FILE_FORMAT_VERSION);
    expect(Number(stores![4])).toBe(EXPORT_FORMAT_VERSION);
  });
});

describe("decision records", () => {
  const record = (name: string) => readFileSync(new URL(`../../docs/decisions/${name}`, import.meta.url), "utf8");

  it("name the schema versions the stores are at now", () => {
    expect(/the schema is now at version (\d+)/.exec(record("0001-sqlite-schema.md"))?.[1]).toBe(
      String(SQLITE_SCHEMA_VERSION),
    );
    expect(/the schema is now at version (\d+)/.exec(record("0002-postgres-schema.md"))?.[1]).toBe(
      String(SCHEMA_VERSION),
    );
  });
});
