import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { importOptional } from "../../src/stores/_util.js";
import { createStore, pathOfUrl } from "../../src/stores/url.js";
import { expectCode } from "../../src/testing/index.js";

const dir = mkdtempSync(join(tmpdir(), "threadkeep-url-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("createStore(url)", () => {
  it.each([
    ["memory:", "memory"],
    [`file:${join(dir, "sessions")}`, "file"],
    [`sqlite:${join(dir, "x.db")}`, "sqlite"],
    ["sqlite::memory:", "sqlite"],
    // Network stores connect on first use, so naming them opens nothing here.
    ["postgres://postgres@127.0.0.1:5432/test", "postgres"],
    ["postgresql://postgres@127.0.0.1:5432/test", "postgres"],
    ["redis://127.0.0.1:6379", "redis"],
  ])("opens %s as the %s store", async (url, name) => {
    const store = await createStore(url);
    expect(store.name).toBe(name);
    await store.close();
  });

  it.each(["", "   ", "mongodb://db/x", "sqlite", "file:", "sqlite:", "./data/threadkeep.db"])(
    "refuses %j with invalid_store_url",
    async (url) => {
      await expectCode(createStore(url), "invalid_store_url");
    },
  );

  it("reads file: and sqlite: paths in their usual spellings", () => {
    expect(pathOfUrl("file:./data/sessions", "file:")).toBe("./data/sessions");
    expect(pathOfUrl("file:///var/lib/tk", "file:")).toBe("/var/lib/tk");
    expect(pathOfUrl("sqlite:./data/my%20db.db", "sqlite:")).toBe("./data/my db.db");
  });
});

describe("optional client packages", () => {
  it("turns a missing package into missing_dependency naming what to install", async () => {
    const missing = Object.assign(new Error("Cannot find package 'redis' imported from x"), {
      code: "ERR_MODULE_NOT_FOUND",
    });
    const error = await importOptional(() => Promise.reject(missing), "redis", "redis").catch((e) => e);
    expect(error.code).toBe("missing_dependency");
    expect(error.message).toContain("npm install redis");
    expect(error.cause).toBe(missing);
  });

  it("passes other failures through unchanged", async () => {
    const other = Object.assign(new Error("Cannot find package 'left-pad'"), { code: "ERR_MODULE_NOT_FOUND" });
    await expect(importOptional(() => Promise.reject(other), "redis", "redis")).rejects.toBe(other);
  });
});
