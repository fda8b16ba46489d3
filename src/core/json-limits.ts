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
  /** Refuse the NUL character (U+0000) in strings and keys: PostgreSQL cannot store it. @default false */
  noNul?: boolean;
}

interface Frame {
  value: unknown;
  depth: number;
  parent: Frame | null;
  key: string | number;
}

/** `root.a[2].b`: the path of a frame, its first eight steps (enough to name the field). */
function pathOf(frame: Frame, root: string): string {
  const keys: (string | number)[] = [];
  for (let f: Frame | null = frame; f?.parent; f = f.parent) keys.push(f.key);
  keys.reverse();
  const shown = keys.slice(0, 8).map((k) => (typeof k === "number" ? `[${k}]` : `.${k}`));
  const path = `${root}${shown.join("")}`;
  return path.startsWith(".") ? path.slice(1) : path;
}

/**
 * Checks a JSON value without recursion (a hostile value may be nested thousands deep): nesting at
 * most `maxDepth` levels, and no NUL characters when `noNul` is set.
 * @throws ThreadkeepError `invalid_request` naming the field (`messages[0].metadata.a.a…`).
 */
export function checkJson(value: unknown, root: string, options: CheckJsonOptions = {}): void {
  const maxDepth = options.maxDepth ?? MAX_JSON_DEPTH;
  const stack: Frame[] = [{ value, depth: 0, parent: null, key: "" }];
  const fail = (frame: Frame, message: string): never => {
    const field = pathOf(frame, root) || "body";
    throw new ThreadkeepError("invalid_request", `${field}: ${message}`, { details: { field } });
  };
  while (stack.length > 0) {
    const frame = stack.pop() as Frame;
    const current = frame.value;
    if (typeof current === "string") {
      if (options.noNul && current.includes("\u0000")) fail(frame, "must not contain the NUL character (U+0000)");
      continue;
    }
    if (typeof current !== "object" || current === null) continue;
    if (frame.depth >= maxDepth) fail(frame, `nested deeper than ${maxDepth} levels`);
    if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--)
        stack.push({ value: current[i], depth: frame.depth + 1, parent: frame, key: i });
      continue;
    }
    for (const key of Object.keys(current)) {
      const child = { value: (current as Record<string, unknown>)[key], depth: frame.depth + 1, parent: frame, key };
      if (options.noNul && key.includes("\u0000")) fail(child, "a key must not contain the NUL character (U+0000)");
      stack.push(child);
    }
  }
}
