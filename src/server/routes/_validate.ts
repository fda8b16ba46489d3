import type { z } from "zod";
import { ThreadkeepError } from "../../core/errors.js";

/**
 * Parses a request body or query with a zod schema.
 * @throws ThreadkeepError `invalid_request` naming the first offending field (`messages[2].role`).
 */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const result = schema.safeParse(body ?? undefined);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue.path
    .map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`))
    .join("");
  throw new ThreadkeepError(
    "invalid_request",
    field ? `${field}: ${issue.message}` : `Request body: ${issue.message}`,
    {
      details: { field: field || "body" },
    },
  );
}
