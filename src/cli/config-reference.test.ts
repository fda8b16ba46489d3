import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { renderReference, serveCommand } from "./_config-reference.js";
import { environmentWithFile, settingsOf } from "./_config-file.js";
import { main } from "./index.js";
import { resolveConfig } from "./options.js";
import { resolveRecallConfig } from "./_recall-options.js";
import { resolveClientFlags } from "./_client-options.js";

const page = new URL("../../docs/configuration.md", import.meta.url);
const dir = mkdtempSync(join(tmpdir(), "threadkeep-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe("docs/configuration.md", () => {
  it("lists every serve setting as the command defines it (npm run docs:config rewrites it)", () => {
    const text = readFileSync(page, "utf8");
    expect(renderReference(text)).toBe(text);
  });

  it("has a variable for every serve option, each its own", () => {
    const settings = settingsOf(serveCommand());
    const flags = serveCommand()
      .options.map((o) => o.long)
      .filter((f) => f !== "--config" && f !== "--help");
    expect(settings.map((s) => s.flag)).toEqual(flags);
    expect(new Set(settings.map((s) => s.env)).size).toBe(settings.length);
  });
});

describe("serve --config", () => {
  const command = serveCommand();

  it("takes flags over the environment, the environment over the file, the file over defaults (YAML)", async () => {
    const path = file(
      "a.yaml",
      "port: 9001\nwindow: 7\ntoken-budget: 1234\nsummaries: false\nsession-headers: [x-one, x-two]\nheaders-timeout: 5s\n",
    );
    const env = await environmentWithFile(command, path, { THREADKEEP_WINDOW: "9", THREADKEEP_TOKEN_BUDGET: "" });
    const config = resolveConfig({ port: "9002" }, env);
    expect(config.port).toBe(9002); // flag over file
    expect(config.window).toBe(9); // environment over file
    expect(config.tokenBudget).toBe(1234); // file over default (an empty variable is unset)
    expect(config.sessionHeaders).toEqual(["x-one", "x-two"]);
    expect(config.maxMessages).toBe(resolveConfig({}, {}).maxMessages); // default
    expect(resolveRecallConfig({ summaries: true }, env).summaries).toBe(false);
    expect(resolveClientFlags({}, env).headersTimeoutMs).toBe(5000);
  });

  it("reads JSON", async () => {
    const env = await environmentWithFile(
      command,
      file("b.json", JSON.stringify({ host: "0.0.0.0", "api-keys": "k1:ann" })),
      {},
    );
    const config = resolveConfig({}, env);
    expect(config.host).toBe("0.0.0.0");
    expect(config.apiKeys.get("k1")).toBe("ann");
  });

  it("refuses an unknown key, a value of the wrong kind and a bad value at start, naming the option", async () => {
    await expect(environmentWithFile(command, file("c.yaml", "prot: 9000\n"), {})).rejects.toThrow(
      /unknown key "prot"/,
    );
    await expect(environmentWithFile(command, file("d.yaml", "window: {a: 1}\n"), {})).rejects.toThrow(
      /window \(--window\) must be/,
    );
    await expect(environmentWithFile(command, file("e.json", "{ port: "), {})).rejects.toThrow(/not valid JSON/);
    const env = await environmentWithFile(command, file("f.yaml", "port: abc\nlease-ttl: 1ms\n"), {});
    expect(() => resolveConfig({}, env)).toThrow(/--port must be a port number/);
    const stderr = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      expect(await main(["node", "threadkeep", "serve", "--config", file("g.yaml", "lease-ttl: 1ms\n")])).toBe(2);
      expect(stderr.mock.calls.flat().join("")).toMatch(/--lease-ttl must be at least 100ms/);
    } finally {
      stderr.mockRestore();
    }
  });
});
