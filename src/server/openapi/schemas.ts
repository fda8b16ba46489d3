/**
 * The shapes of answers the routes share (sessions, messages, state, context, errors), for the
 * OpenAPI document only: requests are read with the routes' own zod schemas, and answers are built
 * from core's types. A shape with an `id` is one component of the document.
 */
import { z } from "zod";
import { contextPreferencesSchema } from "../../core/context/preferences.js";
import type { ResponseDoc, RouteContract } from "./route.js";

/** Any JSON object. */
export const AnyObject = z.looseObject({});
const int = z.int();
const ints = z.array(int);
/** An object whose fields may each be missing (answers are described, not checked). */
const shape = <T extends z.ZodRawShape>(fields: T) => z.object(fields).partial();

/** A session id (documented; the store checks it). */
export const SessionId = z.string().meta({
  id: "SessionId",
  description: "A UUID, or user_{uuid}_conv_{uuid}",
  examples: ["3f2b8c1e-6d1a-4c3e-9f7a-2b9d8e1c0a55"],
});

/** The path parameters of a session route. */
export const SessionParams = z.object({ id: SessionId });

/** The OpenAI error body every failure answers with. */
export const ErrorBody = z
  .object({
    error: z.object({ message: z.string(), type: z.string(), code: z.string(), param: z.string().nullish() }),
  })
  .meta({ id: "Error" });

/** A chat message as sent (core/messages.ts checks it; this describes it). */
export const ChatMessage = z
  .looseObject({
    role: z.enum(["system", "developer", "user", "assistant", "tool"]),
    content: z.union([z.string(), z.array(z.unknown()), z.null()]).optional(),
    name: z.string().optional(),
    tool_calls: z.array(AnyObject).optional(),
    tool_call_id: z.string().optional(),
    metadata: AnyObject.optional(),
  })
  .meta({ id: "ChatMessage" });

/** A stored message. */
export const Message = z
  .looseObject({ ...ChatMessage.shape, seq: int, createdAt: int, incomplete: z.boolean().optional() })
  .meta({ id: "Message" });

/** A session. */
export const Session = shape({
  id: SessionId,
  userId: z.string(),
  createdAt: int,
  lastActivityAt: int,
  metadata: AnyObject,
}).meta({
  id: "Session",
});

/** A listing of sessions. */
export const SessionPage = shape({
  data: z.array(Session),
  nextCursor: z.string().nullable(),
  hasMore: z.boolean(),
  store: z.string().describe("With overview=true: the store's name."),
}).meta({ id: "SessionPage" });

/** Session state. */
export const SessionState = shape({ version: int, data: AnyObject }).meta({ id: "SessionState" });

/** A search hit. */
export const SearchHit = shape({
  sessionId: z.string(),
  seq: int,
  snippet: z.string(),
  message: Message,
  score: z.number().describe("semantic: cosine similarity; hybrid: fused reciprocal-rank score"),
  neighbours: z
    .array(shape({ seq: int, role: z.string(), content: z.string() }))
    .describe("the turns after the hit in its session (`neighbours`), oldest first"),
}).meta({ id: "SearchHit" });

/** The context preferences, as session state and PUT …/preferences take them. */
export const ContextPreferences = contextPreferencesSchema.meta({ id: "ContextPreferences" });

/** A summary of older messages. */
export const Summary = shape({
  id: int,
  fromSeq: int,
  toSeq: int,
  content: z.string(),
  createdAt: int,
  metadata: AnyObject,
}).meta({
  id: "Summary",
});

const byReason = <T extends z.ZodType>(value: T) => shape({ window: value, budget: value, toolPairs: value });

/** The context a turn sends, with what was left out. */
export const AssembledContext = shape({
  messages: z.array(ChatMessage),
  tokens: int,
  includedSeqs: ints,
  includedSummaryIds: ints,
  omitted: shape({
    messages: int,
    tokens: int,
    summaries: int,
    truncated: int,
    reasons: byReason(int).describe("Stored messages left out, by reason; they add up to `messages`."),
    summaryTokens: int,
    input: int.describe("Input tool results dropped: no call in the request answers them."),
    seqs: byReason(ints).describe("The stored messages left out, by seq, per reason."),
    truncatedSeqs: ints.describe("Stored messages sent cut to fit."),
  }),
  parts: shape({ system: int, summary: int, stateNote: int, history: int, input: int, priming: int }).describe(
    "Tokens per part; they add up to `tokens`.",
  ),
  window: int.describe("The message window applied."),
  tokenBudget: int,
  encoding: z.string().describe("Tokenizer encoding used for counting, e.g. o200k_base."),
  stateNote: z.string().describe("The state note included in `messages`, if any."),
}).meta({ id: "AssembledContext" });

/** `{ data: [...] }` of `item`. */
export const listOf = (item: z.ZodType) => shape({ data: z.array(item) });

/** What was deleted: `{ id, deleted }`. */
export const Deleted = shape({ id: z.string(), object: z.string(), deleted: z.boolean() });

/** A JSON answer. */
export const ok = (description: string, json: z.ZodType = AnyObject): ResponseDoc => ({ description, json });
/** A failure, with the OpenAI error body. */
export const error = (description: string): ResponseDoc => ({ description, json: ErrorBody });

/** The failures of the session and chat routes. */
export const sessionFailures = {
  "400": error(
    "Invalid request, message, session id or end user (`invalid_request`, `invalid_message`, `invalid_session_id`, `invalid_user`)",
  ),
  "401": error("Missing or unknown API key (`invalid_api_key`), or a bad end-user token (`invalid_user_token`)"),
  "403": error("`X-Threadkeep-User` sent with a key that is not an operator key (`operator_only`)"),
  "404": error("No such session for this user (`session_not_found`)"),
  "503": error(
    "The store is unavailable (`store_unavailable`), or its database refused the turn lease (`store_misconfigured`)",
  ),
};

/** A contract builder that adds `failures` to each contract's responses. */
export const withFailures =
  (failures: Record<string, ResponseDoc>) =>
  (contract: RouteContract): RouteContract => ({ ...contract, responses: { ...contract.responses, ...failures } });
