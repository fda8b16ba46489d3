/**
 * What the Responses and Conversations routes share: the item list page (`data`, `first_id`,
 * `last_id`, `has_more`, paged by `after` / `limit` / `order`) and their "not found" errors.
 */
import { z } from "zod";
import { isThreadkeepError, ThreadkeepError } from "../../core/errors.js";
import type { Item } from "../../core/items/index.js";
import { parseBody } from "./_validate.js";
import { AnyObject, error } from "../openapi/schemas.js";

/** The `metadata` of a response or a conversation, as OpenAI limits it. */
export const Metadata = z
  .record(z.string(), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, "at most 16 keys");

/** The query of an item list. */
export const PageQuery = z.object({
  after: z.string().min(1).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  order: z.enum(["asc", "desc"]).default("desc"),
});

/** What the document says of {@link PageQuery}. */
export const PAGE_NOTES = { after: "Item id to start after" };

/** {@link ItemPage}, in the document. */
export const ItemPageDoc = z
  .object({
    object: z.literal("list"),
    data: z.array(AnyObject),
    first_id: z.string().nullable(),
    last_id: z.string().nullable(),
    has_more: z.boolean(),
  })
  .partial();

/** The failures of the Responses, Conversations and models routes. */
export const itemFailures = {
  "400": error("Invalid request: the `param` names the field (`invalid_request`)"),
  "401": error("Missing or unknown API key (`invalid_api_key`), or a bad end-user token (`invalid_user_token`)"),
  "404": error("No such response, conversation or item for this user (`not_found`)"),
};

/** A page of items, as the OpenAI list endpoints answer. */
export interface ItemPage {
  object: "list";
  data: Item[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

/** A list of items as a page (all of them: used where nothing is paged). */
export function itemList(items: Item[]): ItemPage {
  return {
    object: "list",
    data: items,
    first_id: items[0]?.id ?? null,
    last_id: items.at(-1)?.id ?? null,
    has_more: false,
  };
}

/**
 * One page of `items` (oldest first) for a list query: newest first unless `order=asc`, starting
 * after the item `after`. @throws ThreadkeepError `invalid_request` for a bad query.
 */
export function pageOf(items: Item[], query: unknown): ItemPage {
  const { after, limit, order } = parseBody(PageQuery, query);
  const ordered = order === "desc" ? [...items].reverse() : items;
  let start = 0;
  if (after) {
    const at = ordered.findIndex((item) => item.id === after);
    if (at < 0)
      throw new ThreadkeepError("invalid_request", `after: no item with id ${JSON.stringify(after.slice(0, 100))}`, {
        details: { field: "after" },
      });
    start = at + 1;
  }
  const data = ordered.slice(start, start + limit);
  return { ...itemList(data), has_more: start + limit < ordered.length };
}

/** OpenAI's "not found" for a response, conversation or item. */
export function notFound(what: string, id: string, param?: string): ThreadkeepError {
  return new ThreadkeepError(
    "not_found",
    `${what} with id '${id.slice(0, 200)}' not found.`,
    param ? { details: { field: param } } : {},
  );
}

/** Runs `fn`, turning `session_not_found` (missing, or another owner's) into `error`. */
export async function orNotFound<T>(fn: () => Promise<T>, error: () => ThreadkeepError): Promise<T> {
  try {
    return await fn();
  } catch (cause) {
    if (isThreadkeepError(cause, "session_not_found") || isThreadkeepError(cause, "invalid_session_id")) throw error();
    throw cause;
  }
}
