import { describe, expect, it } from "vitest";
import { sharedStoreUrl } from "./_workers.js";

describe("sharedStoreUrl", () => {
  it("puts SQLite's turn lease in the file and keeps network stores as they are", () => {
    expect(sharedStoreUrl("sqlite:./data/threadkeep.db")).toBe("sqlite:./data/threadkeep.db?lease=shared");
    expect(sharedStoreUrl("sqlite:./x.db?lease=shared")).toBe("sqlite:./x.db?lease=shared");
    expect(sharedStoreUrl("postgres://u@h/db")).toBe("postgres://u@h/db");
    expect(sharedStoreUrl("redis://127.0.0.1:6379")).toBe("redis://127.0.0.1:6379");
  });

  it("refuses stores that live in one process", () => {
    expect(() => sharedStoreUrl("memory:")).toThrow(/memory: lives in one process/);
    expect(() => sharedStoreUrl("file:./data")).toThrow(/file: lives in one process/);
  });
});
