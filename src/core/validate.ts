import type { z } from "zod";
import { ThreadkeepError } from "./errors.js";

/**
 * Parses `value` with `schema`, or throws `invalid_request` naming the first offending field as a
 * dotted path under `root` (`preferences.focusRange.toSeq`).
 */
export function parseWith<T>(schema: z.ZodType<T>, value: unknown, root: string): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const keys = issue.code === "unrecognized_keys" ? [issue.keys[0]] : [];
  const field = [root, ...issue.path.map(String), ...keys].join(".");
  const message = issue.code === "unrecognized_keys" ? "unknown field" : issue.message;
  throw new ThreadkeepError("invalid_request", `${field}: ${message}`, { details: { field } });
}
