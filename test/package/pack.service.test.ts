/**
 * The package as a new user gets it: `npm pack`, installed into an empty folder with its dependencies
 * from the registry, then the README's quick start as pasted and the `threadkeep` command through npx.
 * One packed install serves every test here.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";
import { type Installed, packAndInstall, ROOT, run } from "./_install.js";

const work = mkdtempSync(join(tmpdir(), "tk-pack-"));
let pkg: Installed;
let fake: FakeUpstream;

beforeAll(async () => {
  [pkg, fake] = await Promise.all([packAndInstall(work), startFakeUpstream()]);
}, 330_000);
afterAll(async () => {
  await fake?.close();
});
// Removes the app's 12,000 hard-linked files: 2.7 s idle, past the default 30 s at load 17-19, waiting
// for a core and the disk (12,900 such files: 0.4 s of CPU, 5-8 s by the clock at load 19). A time-out
// cannot stop a synchronous removal, only fail the run once it is done, so this hook has none (0).
afterAll(() => rmSync(work, { recursive: true, force: true }), 0);

/** The code block of a README section (`<!-- section:NAME -->`). */
function readmeBlock(section: string, lang: string): string {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const body = readme.split(`<!-- section:${section} -->`)[1].split(`<!-- section:end ${section} -->`)[0];
  return body.split("```" + lang + "\n")[1].split("```")[0];
}

const npx = (args: string[], input = "", env: Record<string, string> = {}) =>
  run("npx", args, { cwd: pkg.app, input, env: { THREADKEEP_STORE: "", THREADKEEP_UPSTREAM_URL: "", ...env } });

describe("the packed package", () => {
  it("holds the build, the user docs and the license, and nothing else", () => {
    for (const file of [
      "package.json",
      "README.md",
      "LICENSE",
      "dist/index.js",
      "dist/index.d.ts",
      "dist/cli/bin.js",
      "dist/server/ui/index.html",
      "dist/server/ui/app.js",
    ]) {
      expect(pkg.files).toContain(file);
    }
    // Every user page of docs/ ships (the README and the pages link to each other); the decision
    // records, the screenshots, sources, tests, benchmarks and source maps do not.
    const userDocs = readdirSync(join(ROOT, "docs")).filter((name) => name.endsWith(".md"));
    expect(userDocs).toContain("cli.md");
    expect(pkg.files.filter((f) => f.startsWith("docs/")).sort()).toEqual(
      userDocs.map((name) => `docs/${name}`).sort(),
    );
    expect(pkg.files.filter((f) => !/^dist\/|^docs\/[^/]+\.md$/.test(f)).sort()).toEqual([
      "CHANGELOG.md",
      "LICENSE",
      "README.md",
      "package.json",
    ]);
    expect(pkg.files.filter((f) => /\.test\.|\.map$|\.png$|^bench\/|^test\/|^src\//.test(f))).toEqual([]);
    // What users download stays small: the built code and the pages, not a lab notebook. The lists above
    // already keep tests, maps, images and benchmarks out; this bound is the backstop for anything else
    // large (2.66 MB on 2026-12-07: 2.1 MB of built code and types, 0.4 MB of pages).
    const unpacked = pkg.files.reduce((sum, f) => sum + statSync(join(pkg.app, "node_modules/threadkeep", f)).size, 0);
    expect(unpacked).toBeLessThan(3 * 1024 * 1024);
    const manifest = JSON.parse(readFileSync(join(pkg.app, "node_modules/threadkeep/package.json"), "utf8"));
    for (const field of ["types", "engines", "license", "sideEffects", "bin", "files", "exports"]) {
      expect(manifest[field], field).toBeDefined();
    }
    for (const target of Object.values<Record<string, string> | string>(manifest.exports)) {
      const paths = typeof target === "string" ? [target] : Object.values(target);
      for (const path of paths) expect(pkg.files, path).toContain(path.replace(/^\.\//, ""));
    }
  });

  it("runs the README library quick start as pasted", async () => {
    writeFileSync(join(pkg.app, "quickstart.mjs"), readmeBlock("library", "ts"));
    const result = await run(process.execPath, ["quickstart.mjs"], { cwd: pkg.app });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("Created task 42: buy groceries.");
    expect(result.stdout).toContain("snippet");
    expect(result.stdout).toContain("Make that due tomorrow");
  });

  it("exports the documented functions from the main entry, and the subpaths resolve", async () => {
    const code = `
      const main = await import("threadkeep");
      const names = ["createMemory", "createStore", "exportSessions", "importSessions", "migrateStores", "readExport"];
      console.log(names.map((n) => n + ":" + typeof main[n]).join(" "));
      for (const sub of ["kit", "stores/memory", "stores/file", "stores/sqlite", "server", "llm", "cli"]) await import("threadkeep/" + sub);
    `;
    const result = await run(process.execPath, ["--input-type=module", "-e", code], { cwd: pkg.app });
    expect(result.stderr).toBe("");
    expect(result.stdout.trim().split(" ")).toEqual(
      ["createMemory", "createStore", "exportSessions", "importSessions", "migrateStores", "readExport"].map(
        (n) => `${n}:function`,
      ),
    );
  });

  it("builds the minimal third-party store from threadkeep and threadkeep/kit alone, and runs it", async () => {
    // test/fixtures/minimal-store.ts as docs/custom-store.md shows it: type-checked against the
    // installed package's declarations, compiled, then a session written and read through Memory.
    const source = readFileSync(join(ROOT, "test/fixtures/minimal-store.ts"), "utf8");
    const asUser = source
      .replace('"../../src/index.js"', '"threadkeep"')
      .replace('"../../src/stores/kit.js"', '"threadkeep/kit"');
    expect(asUser).not.toContain("../");
    writeFileSync(join(pkg.app, "minimal-store.ts"), asUser);
    const compilerOptions = {
      strict: true,
      target: "es2022",
      module: "nodenext",
      moduleResolution: "nodenext",
      lib: ["es2022", "dom"],
      types: [],
      skipLibCheck: true,
    };
    writeFileSync(
      join(pkg.app, "tsconfig.minimal.json"),
      JSON.stringify({ compilerOptions, files: ["minimal-store.ts"] }),
    );
    const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
    const compiled = await run(process.execPath, [tsc, "-p", "tsconfig.minimal.json"], { cwd: pkg.app });
    expect(compiled.stdout + compiled.stderr).toBe("");
    expect(compiled.code).toBe(0);
    const code = `
      import { createMemory } from "threadkeep";
      import { createMapStore } from "./minimal-store.js";
      const memory = createMemory({ store: createMapStore() });
      const session = await memory.startSession({ userId: "ada" });
      await session.addMessages([{ role: "user", content: "hello" }, { role: "assistant", content: "hi" }]);
      console.log((await session.getMessages()).map((m) => m.content).join(","));
    `;
    const result = await run(process.execPath, ["--input-type=module", "-e", code], { cwd: pkg.app });
    expect(result.stderr).toBe("");
    expect(result.stdout.trim()).toBe("hello,hi");
  });

  it("runs npx threadkeep --help", async () => {
    const result = await npx(["threadkeep", "--help"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("Usage: threadkeep");
    expect(result.stdout).toMatch(/serve \[options\]/);
  });

  it("fails a command whose code cannot load with the loader's error, not as an unknown command", async () => {
    // A broken install: a dependency of `threadkeep mcp` is missing from node_modules.
    const sdk = join(pkg.app, "node_modules", "@modelcontextprotocol", "sdk");
    renameSync(sdk, `${sdk}.gone`);
    try {
      const result = await npx(["threadkeep", "mcp", "--store", "memory:"]);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/^threadkeep: Cannot find (package|module) .*@modelcontextprotocol\/sdk/m);
      expect(result.stderr).not.toContain("unknown command");
    } finally {
      renameSync(`${sdk}.gone`, sdk);
    }
  });

  it("chats with npx threadkeep chat, the history kept in the store", async () => {
    const flags = ["--store", "sqlite:./data/chat.db", "--upstream", fake.url, "--model", "fake-model"];
    const result = await npx(["threadkeep", "chat", ...flags], "My name is Ada.\nWhat is my name?\n");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("echo: What is my name?");
    expect(
      fake
        .chatRequests()
        .at(-1)!
        .body.messages.map((m: { content: string }) => m.content),
    ).toEqual(["My name is Ada.", "echo: My name is Ada.", "What is my name?"]);
  });

  it("serves the proxy with npx threadkeep serve", async () => {
    const child = spawn("npx", ["threadkeep", "serve", "--port", "0", "--store", "memory:", "--upstream", fake.url], {
      cwd: pkg.app,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = "";
        child.stdout.on("data", (d) => {
          out += d;
          const found = /listening on (http:\/\/\S+)/.exec(out);
          if (found) resolve(found[1]);
        });
        child.on("exit", (code) => reject(new Error(`serve exited with ${code}: ${out}`)));
      });
      const sessionId = crypto.randomUUID();
      const ask = (content: string) =>
        fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-session-id": sessionId },
          body: JSON.stringify({ model: "m", messages: [{ role: "user", content }] }),
        }).then((r) => r.json() as Promise<{ choices: { message: { content: string } }[] }>);
      await ask("first");
      const reply = await ask("second");
      expect(reply.choices[0].message.content).toBe("echo: second");
      expect(fake.chatRequests().at(-1)!.body.messages).toHaveLength(3);
      // The inspector page ships in the package and is served by the same process.
      for (const path of ["/ui", "/ui/assets/app.js", "/ui/assets/app.css"])
        expect((await fetch(`${url}${path}`)).status, path).toBe(200);
    } finally {
      process.kill(-child.pid!, "SIGTERM");
    }
  });
});
