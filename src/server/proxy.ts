/**
 * POST /v1/chat/completions: the OpenAI chat API with memory. The session comes from X-Session-ID
 * (a new one without it); the history comes from the store; the turn is committed after the upstream
 * answered; every response carries X-Session-ID.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { ThreadkeepError } from "../core/errors.js";
import { newSessionId, parseSessionId } from "../core/ids.js";
import { validateMessages } from "../core/messages.js";
import type { ClientMode } from "../core/reconcile.js";
import type { ChatMessage } from "../core/types.js";
import { parseBody } from "./_validate.js";
import { headerValue, runIdempotentTurn, SESSION_HEADER, type TurnDialect, type TurnRouteDeps } from "./run-turn.js";
import { chatStreamDialect } from "./stream.js";
import { replyMessage } from "./turn.js";

export { SESSION_HEADER, WARNING_HEADER } from "./run-turn.js";

/** What the chat route needs. */
export type ProxyDeps = TurnRouteDeps;

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

/** The session id a request names (validated), or a new one. */
export function sessionIdOf(request: FastifyRequest): { id: string; given: boolean } {
  const header = headerValue(request.headers[SESSION_HEADER]);
  if (header === undefined || header === "") return { id: newSessionId(), given: false };
  return { id: parseSessionId(header.trim()), given: true };
}

/** `X-Threadkeep-Client: whole-history | thin`: how a client declares it sends history. */
export function declaredClient(request: FastifyRequest): ClientMode | undefined {
  const value = headerValue(request.headers["x-threadkeep-client"])?.trim().toLowerCase();
  return value === "whole-history" || value === "thin" ? value : undefined;
}

/** The chat completions dialect: messages as sent, the upstream's answer passed back as it came. */
function chatDialect(chat: ChatRequest, defaultModel: string | undefined, client: ClientMode | undefined): TurnDialect {
  const model = chat.body.model ?? defaultModel;
  return {
    input: chat.messages,
    client,
    model,
    stream: chat.body.stream === true,
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
export function registerProxy(app: FastifyInstance, deps: ProxyDeps): void {
  app.post("/v1/chat/completions", async (request, reply) => {
    const session = sessionIdOf(request);
    reply.header(SESSION_HEADER, session.id);
    const chat = parseChatRequest(request.body);
    if (!deps.upstream) {
      throw new ThreadkeepError(
        "upstream_not_configured",
        "No upstream model is configured: start threadkeep with --upstream <OpenAI-compatible base URL>",
      );
    }
    return runIdempotentTurn(deps, request, reply, {
      sessionId: session.id,
      scope: session.given ? session.id : "",
      body: chat.body,
      dialect: chatDialect(chat, deps.defaultModel, declaredClient(request)),
    });
  });
}
