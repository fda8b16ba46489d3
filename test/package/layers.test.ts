/**
 * Layers only point down, no module imports itself round a circle, an underscored file stays in its
 * layer, and a migration never imports its store: `scripts/check-layers.mjs` over src/, and the same
 * checker shown to catch each kind of break in a small tree of its own.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const CHECKER = join(dirname(fileURLToPath(import.meta.url)), "../../scripts/check-layers.mjs");
const work = mkdtempSync(join(tmpdir(), "tk-layers-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function check(dir?: string): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHECKER, ...(dir ? [dir] : [])]);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stderr, stdout }));
  });
}

describe("the layers of src/", () => {
  it("hold: no import from a higher layer or a peer, no import circle, no underscored file used from outside its layer", async () => {
    const result = await check();
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });

  it("are checked for every kind of import, and a circle is printed", async () => {
    const files: Record<string, string> = {
      "core/static.ts": 'import { x } from "../cli/x.js";\nexport const y = x;\n',
      "core/dynamic.ts": 'export const load = () => import("../stores/p.js");\n',
      "core/type-only.ts": 'import type { S } from "../server/s.js";\nexport type T = S;\n',
      "core/inline-type.ts": 'export type U = import("../llm/l.js").L;\n',
      "core/fine.ts": 'export type { T } from "./type-only.js";\n',
      "stores/p.ts": 'import type { Q } from "./q.js";\nexport type P = Q;\n',
      "stores/q.ts": 'import type { P } from "./p.js";\nexport type Q = P | 1;\n',
      "stores/peer.ts": 'export { createUpstream } from "../llm/l.js";\n',
      "llm/l.ts": "export type L = 1;\nexport const createUpstream = 1;\n",
      "server/s.ts": "export type S = 1;\n",
      "server/private.ts": 'import { z } from "../stores/_z.js";\nexport const w = z;\n',
      "stores/_z.ts": "export const z = 1;\n",
      "stores/sibling.ts": 'export { z } from "./_z.js";\n',
      "cli/x.ts": "export const x = 1;\n",
      "stores/kv/index.ts": "export const store = 1;\n",
      "stores/kv/migrations/001-initial.ts": 'import { store } from "../index.js";\nexport const up = store;\n',
      "stores/kv/migrations/index.ts": 'export { up } from "./001-initial.js";\n',
      "elsewhere/e.ts": 'import type { S } from "../server/s.js";\nexport type E = S;\n',
    };
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(work, "src", path)), { recursive: true });
      writeFileSync(join(work, "src", path), text);
    }
    const result = await check(join(work, "src"));
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split("\n").sort()).toEqual([
      "check-layers: 9 problem(s)",
      'import circle of 2 files (src/stores/p.ts, src/stores/q.ts): src/stores/p.ts -> src/stores/q.ts -> src/stores/p.ts',
      'src/core/dynamic.ts: imports "../stores/p.js" (src/stores/p.ts): core may not import from stores',
      'src/core/inline-type.ts: imports "../llm/l.js" (src/llm/l.ts): core may not import from llm',
      'src/core/static.ts: imports "../cli/x.js" (src/cli/x.ts): core may not import from cli',
      'src/core/type-only.ts: imports "../server/s.js" (src/server/s.ts): core may not import from server',
      "src/elsewhere/e.ts: src/elsewhere has no place in the layer table of scripts/check-layers.mjs",
      'src/server/private.ts: imports "../stores/_z.js" (src/stores/_z.ts): an underscored file is private to src/stores',
      'src/stores/kv/migrations/001-initial.ts: imports "../index.js" (src/stores/kv/index.ts): a migration may not import its store',
      'src/stores/peer.ts: imports "../llm/l.js" (src/llm/l.ts): stores may not import from llm',
    ]);
  });
});
