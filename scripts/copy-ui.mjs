// Copies the inspector page's static files (src/server/ui) next to the compiled server:
// dist/server/ui, or <dist>/server/ui for a dist folder given as the argument.
import { cpSync, rmSync } from "node:fs";
import { resolve } from "node:path";
import process from "node:process";
import { fileURLToPath, URL } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const to = resolve(process.argv[2] ?? resolve(root, "dist"), "server/ui");
rmSync(to, { recursive: true, force: true });
cpSync(resolve(root, "src/server/ui"), to, { recursive: true, filter: (path) => !path.endsWith("tsconfig.json") });
