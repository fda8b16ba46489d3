import { ThreadkeepError } from "./errors.js";

/**
 * Deepest nesting of objects and arrays accepted in a request body, a message, metadata or state.
 * Deeper JSON overflows the stack of `JSON.stringify` on its way to a store or a model. @default 64
 */
export const MAX_JSON_DEPTH = 64;

/** Options of {@link checkJson}. */
export interface CheckJsonOptions {
  /** @default MAX_JSON_DEPTH */
  maxDepth?: number;
}

/** The path to the first object or array nested at `maxDepth` (recursion bounded by `maxDepth`). */
function deepPath(value: unknown, maxDepth: number, depth = 0): (string | number)[] | null {
  if (typeof value !== "object" || value === null) return null;
  if (depth >= maxDepth) return [];
  const entries: [string | number, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [i, v])
    : Object.entries(value as Record<string, unknown>);
  for (const [key, child] of entries) {
    const rest = deepPath(child, maxDepth, depth + 1);
    if (rest) return [key, ...rest];
  }
  return null;
}

/**
 * Checks that a JSON value nests objects and arrays at most `maxDepth` levels, without recursion (a
 * hostile value may be nested thousands deep) and without an allocation per value, so a body of
 * many small values costs little more than reading it.
 * @throws ThreadkeepError `invalid_request` naming the field (`messages[0].metadata.a.a`, its first
 * eight steps).
 */
export function checkJson(value: unknown, root: string, options: CheckJsonOptions = {}): void {
  if (typeof value !== "object" || value === null) return;
  const maxDepth = options.maxDepth ?? MAX_JSON_DEPTH;
  const values: object[] = [value];
  const depths: number[] = [0];
  while (values.length > 0) {
    const current = values.pop() as Record<string, unknown> | unknown[];
    const depth = depths.pop() as number;
    if (depth >= maxDepth) {
      const keys = (deepPath(value, maxDepth) ?? []).slice(0, 8);
      const path = `${root}${keys.map((k) => (typeof k === "number" ? `[${k}]` : `.${k}`)).join("")}`;
      const field = (path.startsWith(".") ? path.slice(1) : path) || "body";
      throw new ThreadkeepError("invalid_request", `${field}: nested deeper than ${maxDepth} levels`, {
        details: { field },
      });
    }
    if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) {
        const child = current[i];
        if (typeof child === "object" && child !== null) {
          values.push(child);
          depths.push(depth + 1);
        }
      }
      continue;
    }
    for (const key in current) {
      const child = current[key];
      if (typeof child === "object" && child !== null) {
        values.push(child);
        depths.push(depth + 1);
      }
    }
  }
}
