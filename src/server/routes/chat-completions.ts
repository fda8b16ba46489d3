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

const ChatBody = z.looseObject({
  messages: z.array(z.unknown()).min(1, "at least one message is required"),
  model: z.string().min(1).optional(),
  stream: z.boolean().nullish(),
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
  app.post("/v1/chat/completions", async (request, reply) => {
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
        passThrough(deps, request, reply, { kind: side ?? "temporary", dialect: chatDialect(chat, deps.defaultModel), messages: sent }),
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
