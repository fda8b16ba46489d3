/**
 * POST /v1/chat/completions: the OpenAI chat API with memory. The session comes from X-Session-ID,
 * else a front-end's chat header (front-ends/session-headers.ts), else a new one; the history comes
 * from the store; the turn is committed after the upstream answered; every turn's response carries
 * X-Session-ID. A temporary chat or a front-end's side request is answered and forgotten instead.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { ThreadkeepError } from "../../core/errors.js";
import { validateMessages } from "../../core/messages.js";
import type { ChatMessage } from "../../core/types.js";
import { parseBody } from "./_validate.js";
import { clientHintOf, passThrough, sessionTargetOf, sideRequestOf } from "../front-ends/index.js";
import { runIdempotentTurn, SESSION_HEADER, type TurnDialect, type TurnRouteDeps } from "../turn/run.js";
import { chatStreamDialect } from "../turn/stream.js";
import { replyMessage } from "../turn/reply.js";
import { withFairShare } from "../fair-share.js";
import { addRoute, shownAs } from "../openapi/route.js";
import {
  AnyObject,
  ChatMessage as ChatMessageDoc,
  error,
  SessionId,
  sessionFailures,
  withFailures,
} from "../openapi/schemas.js";
import type { SideRequestKind } from "../front-ends/index.js";

const ChatBody = z.looseObject({
  messages: z.array(shownAs(z.unknown(), ChatMessageDoc)).min(1, "at least one message is required"),
  model: z.string().min(1).optional(),
  stream: z.boolean().nullish(),
});

/** What X-Threadkeep-Pass-Through may say (a type checks each is one). */
const PASS_THROUGH_KINDS = [
  "temporary",
  "title",
  "tags",
  "follow_ups",
  "queries",
  "autocomplete",
  "emoji",
  "image_prompt",
  "function_calling",
  "moa",
  "other",
] as const satisfies readonly (SideRequestKind | "temporary")[];
const WARNINGS = [
  "context-unavailable",
  "not-saved",
  "save-unconfirmed",
  "history-omitted",
  "input-truncated",
] as const;
const header = (name: string, description: string, schema: z.ZodType = z.string()) => ({ name, schema, description });

/** The contract of POST /v1/chat/completions. */
export const chatCompletionsContract = withFailures(sessionFailures)({
  method: "POST",
  url: "/v1/chat/completions",
  summary: "OpenAI chat completion with memory",
  description:
    "The new turn is the request's messages after its last assistant message (a new session adopts the whole conversation). System and developer messages are sent, not stored. A temporary chat (`local:` id) and a front-end's background task (Open WebUI's title, tags, follow-ups, queries, autocomplete, emoji, image prompt and tool selection prompts, LibreChat's title prompt, or any request with X-Threadkeep-Task) are passed to the upstream as sent and not stored.",
  headers: [
    header(
      "X-Session-ID",
      "The conversation; else X-OpenWebUI-Chat-Id, else X-Conversation-Id (the order is `serve --session-headers`); a new session when none holds a value.",
      SessionId,
    ),
    header(
      "X-OpenWebUI-Chat-Id",
      "Open WebUI's chat id (ENABLE_FORWARD_USER_INFO_HEADERS). A UUID is the session id; another id maps to a UUID v5 of it; `local:…` is a temporary chat.",
    ),
    header(
      "X-Conversation-Id",
      "LibreChat's conversation id ({{LIBRECHAT_BODY_CONVERSATIONID}}), read as X-OpenWebUI-Chat-Id.",
    ),
    header(
      "X-Threadkeep-Task",
      "The request's background task (e.g. Open WebUI's {{TASK}}: title_generation); empty on a chat turn. A task is answered and not stored.",
    ),
    header(
      "X-Threadkeep-Client",
      "How the client sends history: the whole conversation every time, or only the new turn.",
      z.enum(["whole-history", "thin"]),
    ),
    header("Idempotency-Key", "A retry with the same key returns the first result (24 h, per process)."),
  ],
  body: ChatBody,
  responses: {
    "200": {
      description:
        "The upstream's completion as-is (or, with stream: true, its Server-Sent Events). Headers: X-Session-ID (not on a passed-through request); X-Threadkeep-Pass-Through (temporary, or a side request's kind) on a request answered without a session; X-Threadkeep-Warning (context-unavailable, not-saved, save-unconfirmed, history-omitted, input-truncated) when degraded or cut; Idempotent-Replayed on a replay; the upstream's Retry-After, X-RateLimit-* and X-Request-Id.",
      headers: {
        "X-Session-ID": SessionId,
        "X-Threadkeep-Pass-Through": z.enum(PASS_THROUGH_KINDS),
        "X-Threadkeep-Warning": z.enum(WARNINGS),
      },
      json: AnyObject,
      media: ["text/event-stream"],
    },
    "413": error("Body larger than the limit (`payload_too_large`)"),
    "415": error("Content-Type is not application/json (`unsupported_media_type`)"),
    "429": error(
      "Waited too long for earlier turns of the session (`session_busy`), or over a fair-share limit (`too_many_concurrent_turns`, `rate_limited`, with Retry-After)",
    ),
    "502": error("Upstream unreachable (`upstream_error`); an upstream error status is passed through with its body"),
    "504": error("The upstream stayed silent past the upstream timeout (`upstream_timeout`)"),
  },
});

/** A validated chat request. */
export interface ChatRequest {
  /** The body as sent, with validated messages. */
  body: Record<string, unknown> & { model?: string; stream?: boolean | null };
  messages: ChatMessage[];
}

/** Validates a chat completion body. @throws ThreadkeepError `invalid_request` / `invalid_message`. */
export function parseChatRequest(body: unknown): ChatRequest {
  const parsed = parseBody(ChatBody, body);
  const messages = validateMessages(parsed.messages) as ChatMessage[];
  return { body: parsed as ChatRequest["body"], messages };
}

/** The chat completions dialect: messages as sent, the upstream's answer passed back as it came. */
function chatDialect(chat: ChatRequest, defaultModel: string | undefined, client?: TurnDialect["client"]): TurnDialect {
  const model = chat.body.model ?? defaultModel;
  return {
    input: chat.messages,
    model,
    stream: chat.body.stream === true,
    ...(client ? { client } : {}),
    upstreamBody: (messages) => ({ ...chat.body, messages, ...(model ? { model } : {}) }),
    complete(completion: { model?: string; choices?: { message?: unknown; finish_reason?: string | null }[] }) {
      // Only the first choice is read.
      const choice = completion?.choices?.[0];
      const answer = replyMessage(choice?.message, { model: completion?.model, finishReason: choice?.finish_reason });
      return { reply: answer ? [answer] : [], body: completion };
    },
    streamer: () => chatStreamDialect,
  };
}

/** Adds POST /v1/chat/completions. */
export function registerChatCompletionRoutes(app: FastifyInstance, deps: TurnRouteDeps): void {
  addRoute(app, chatCompletionsContract, async (request, reply) => {
    const target = sessionTargetOf(request.headers, deps.sessionHeaders);
    if (target.kind === "session") reply.header(SESSION_HEADER, target.id);
    const chat = parseChatRequest(request.body);
    if (!deps.upstream) {
      throw new ThreadkeepError(
        "upstream_not_configured",
        "No upstream model is configured: start threadkeep with --upstream <OpenAI-compatible base URL>",
      );
    }
    const side = target.kind === "temporary" ? undefined : sideRequestOf(chat.messages, request.headers);
    if (target.kind === "temporary" || side) {
      reply.removeHeader(SESSION_HEADER);
      // The messages as the client sent them, not as validated.
      const sent = chat.body.messages as ChatMessage[];
      return withFairShare(deps.fairShare, request, side ? "side" : "turn", () =>
        passThrough(deps, request, reply, {
          kind: side ?? "temporary",
          dialect: chatDialect(chat, deps.defaultModel),
          messages: sent,
        }),
      );
    }
    return withFairShare(deps.fairShare, request, "turn", () =>
      runIdempotentTurn(deps, request, reply, {
        sessionId: target.id,
        scope: target.given ? target.id : "",
        body: chat.body,
        dialect: chatDialect(chat, deps.defaultModel, clientHintOf(request.headers)),
      }),
    );
  });
}
