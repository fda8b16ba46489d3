/**
 * Layers only point down, no module imports itself round a circle, an underscored file stays in its
 * folder, a test uses src/'s underscored files only from test/internals/, and a migration never imports
 * its store: `scripts/check-layers.mjs` over src/ (in the quick suite, so `npm run test:quick` checks
 * it), and the same checker shown to catch each kind of break in a small tree of its own.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { checkLayers } from "../../scripts/check-layers.mjs";

const SRC = join(dirname(fileURLToPath(import.meta.url)), "../../src");
const work = mkdtempSync(join(tmpdir(), "tk-layers-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the layers of src/", () => {
  it("hold: no import from a higher layer or a peer, no import circle, no underscored file used from outside its folder", () => {
    expect(checkLayers(SRC)).toEqual([]);
  });

  it("are checked for every kind of import, and a circle is printed", () => {
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
      "stores/kv/below.ts": 'export { z } from "../_z.js";\n',
      "core/a/_inner.ts": "export const inner = 1;\n",
      "core/b/peer.ts": 'export { inner } from "../a/_inner.js";\n',
      "../test/stores/uses-inner.test.ts": 'import { z } from "../../src/stores/_z.js";\nexport const t = z;\n',
      "../test/internals/inner.test.ts":
        'import { z } from "../../src/stores/_z.js";\nexport { h } from "./_helper.js";\nexport const t = z;\n',
      "../test/internals/_helper.ts": 'export { inner as h } from "../../src/core/a/_inner.js";\n',
      "../test/stores/borrows.test.ts": 'export { h } from "../internals/_helper.js";\n',
      "../bench/peeks.ts": 'export { inner } from "../src/core/a/_inner.js";\n',
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
    expect(checkLayers(join(work, "src")).sort()).toEqual([
      'bench/peeks.ts: imports "../src/core/a/_inner.js" (src/core/a/_inner.ts): an underscored file of src/ is used only from test/internals/',
      "import circle of 2 files (src/stores/p.ts, src/stores/q.ts): src/stores/p.ts -> src/stores/q.ts -> src/stores/p.ts",
      'src/core/b/peer.ts: imports "../a/_inner.js" (src/core/a/_inner.ts): an underscored file is private to src/core/a/',
      'src/core/dynamic.ts: imports "../stores/p.js" (src/stores/p.ts): core may not import from stores',
      'src/core/inline-type.ts: imports "../llm/l.js" (src/llm/l.ts): core may not import from llm',
      'src/core/static.ts: imports "../cli/x.js" (src/cli/x.ts): core may not import from cli',
      'src/core/type-only.ts: imports "../server/s.js" (src/server/s.ts): core may not import from server',
      "src/elsewhere/e.ts: src/elsewhere has no place in the layer table of scripts/check-layers.mjs",
      'src/server/private.ts: imports "../stores/_z.js" (src/stores/_z.ts): an underscored file is private to src/stores/',
      'src/stores/kv/migrations/001-initial.ts: imports "../index.js" (src/stores/kv/index.ts): a migration may not import its store',
      'src/stores/peer.ts: imports "../llm/l.js" (src/llm/l.ts): stores may not import from llm',
      'test/stores/borrows.test.ts: imports "../internals/_helper.js" (test/internals/_helper.ts): test/internals/ is used only from test/internals/',
      'test/stores/uses-inner.test.ts: imports "../../src/stores/_z.js" (src/stores/_z.ts): an underscored file of src/ is used only from test/internals/',
    ]);
  });
});
