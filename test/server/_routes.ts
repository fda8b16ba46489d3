/** The routes a fastify instance has registered, read from its route tree. */

/** `METHOD /path/:param` of every route in fastify's `printRoutes({ commonPrefix: false })` tree. */
export function registeredRoutes(tree: string): string[] {
  const routes: string[] = [];
  const stack: { depth: number; path: string }[] = [];
  for (const line of tree.split("\n")) {
    const match = /^([│ ]*)(?:├── |└── )(\S+)(?: \(([^)]+)\))?/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length;
    while (stack.length > 0 && stack.at(-1)!.depth >= depth) stack.pop();
    const path = (stack.at(-1)?.path ?? "") + match[2]!;
    stack.push({ depth, path });
    for (const method of match[3]?.split(", ") ?? []) routes.push(`${method} ${path}`);
  }
  return routes;
}
