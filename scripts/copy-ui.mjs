// Copies the inspector page's static files (src/server/ui) next to the compiled server (dist/server/ui).
import { cpSync, rmSync } from "node:fs";
import { URL } from "node:url";

const from = new URL("../src/server/ui/", import.meta.url);
const to = new URL("../dist/server/ui/", import.meta.url);
rmSync(to, { recursive: true, force: true });
cpSync(from, to, { recursive: true, filter: (path) => !path.endsWith("tsconfig.json") });
