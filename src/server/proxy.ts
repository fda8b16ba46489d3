/**
 * POST /v1/chat/completions: the OpenAI chat API with memory. The session comes from X-Session-ID
 * (a new one without it); the history comes from the store; the turn is committed after the upstream
 * answered; every response carries X-Session-ID.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { ThreadkeepError } from "../core/errors.js";
import { newSessionId, parseSessionId } from "../core/ids.js";
import { validateMessages } from "../core/messages.js";
import type { ChatMessage } from "../core/types.js";
import { type Upstream, UpstreamError } from "../llm/openai-compatible.js";
import { parseBody } from "./_validate.js";
import { fingerprintOf, type IdempotencyCache, type TurnOutcome } from "./idempotency.js";
import { secondsSince } from "./metrics.js";
import { streamTurn } from "./stream.js";
import { commitTurn, loadTurn, replyMessage, type TurnDeps, withTurnLease } from "./turn.js";

/** What the chat route needs. */
export interface ProxyDeps extends Omit<TurnDeps, "log"> {
  upstream?: Upstream;
  idempotency: IdempotencyCache;
  /** Model used when a request names none. */
  defaultModel?: string;
}

/** The header that carries the session id, both ways. */
export const SESSION_HEADER = "x-session-id";
/** The header that reports a degraded turn: `context-unavailable`, `not-saved`. */
export const WARNING_HEADER = "x-threadkeep-warning";

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

/** Adds a warning to the X-Threadkeep-Warning list of a response. */
function addWarning(headers: Record<string, string>, warning: string): void {
  headers[WARNING_HEADER] = headers[WARNING_HEADER] ? `${headers[WARNING_HEADER]}, ${warning}` : warning;
}

const headerValue = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/** The session id a request names (validated), or a new one. */
export function sessionIdOf(request: FastifyRequest): { id: string; given: boolean } {
  const header = headerValue(request.headers[SESSION_HEADER]);
  if (header === undefined || header === "") return { id: newSessionId(), given: false };
  return { id: parseSessionId(header.trim()), given: true };
}

/** Sends a recorded outcome again (an idempotent retry). */
function replay(reply: FastifyReply, outcome: TurnOutcome): void {
  const headers = { ...outcome.headers, "idempotent-replayed": "true" };
  if (outcome.kind === "json") {
    reply.code(outcome.status).headers(headers).send(outcome.body);
    return;
  }
  reply.hijack();
  reply.raw.writeHead(outcome.status, headers);
  reply.raw.end(outcome.events.map((data) => `data: ${data}\n\n`).join(""));
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
    const userId = request.userId;
    const key = headerValue(request.headers["idempotency-key"]);
    if (!key) {
      await runChat(deps, request, reply, session.id, chat, false);
      return reply;
    }
    const ticket = await deps.idempotency.begin(
      `${userId}\n${session.given ? session.id : ""}\n${key}`,
      fingerprintOf(chat.body),
    );
    if (!ticket.first) {
      replay(reply, ticket.outcome);
      return reply;
    }
    let outcome: TurnOutcome | undefined;
    try {
      outcome = await runChat(deps, request, reply, session.id, chat, true);
    } finally {
      ticket.settle(outcome);
    }
    return reply;
  });
}

/**
 * One turn under the session's lease. Answers the client itself and returns what it sent (for
 * idempotent replay) when the turn succeeded.
 */
async function runChat(
  deps: ProxyDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  sessionId: string,
  chat: ChatRequest,
  record: boolean,
): Promise<TurnOutcome | undefined> {
  const upstream = deps.upstream as Upstream;
  const turn: TurnDeps = { memory: deps.memory, metrics: deps.metrics, log: request.log };
  const userId = request.userId;
  const started = performance.now();
  const streaming = chat.body.stream === true;
  const model = chat.body.model ?? deps.defaultModel;
  let outcomeLabel = "error";
  try {
    return await withTurnLease(turn, sessionId, async (fence) => {
      const loaded = await loadTurn(turn, sessionId, userId, chat.messages, model);
      const headers: Record<string, string> = { [SESSION_HEADER]: sessionId };
      if (!loaded.contextAvailable) addWarning(headers, "context-unavailable");
      const upstreamBody = { ...chat.body, messages: loaded.messages, ...(model ? { model } : {}) };

      if (streaming) {
        const result = await streamTurn({
          turn,
          upstream,
          request,
          reply,
          sessionId,
          userId,
          loaded,
          upstreamBody,
          headers,
          fence,
          record,
        });
        outcomeLabel = result.label;
        return result.outcome;
      }

      const upstreamStart = performance.now();
      // The upstream's completion, passed back as it came; only its first choice is read.
      let completion: { model?: string; choices?: { message?: unknown; finish_reason?: string | null }[] };
      try {
        completion = await upstream.chat(upstreamBody);
      } finally {
        deps.metrics.upstreamSeconds.observe(secondsSince(upstreamStart));
      }
      const choice = completion?.choices?.[0];
      const answer = replyMessage(choice?.message, {
        model: completion?.model,
        finishReason: choice?.finish_reason,
      });
      const saved = await commitTurn(
        turn,
        sessionId,
        userId,
        answer ? [...loaded.toStore, answer] : loaded.toStore,
        fence,
        loaded.session,
      );
      if (!saved) addWarning(headers, "not-saved");
      outcomeLabel = saved ? "ok" : "not_saved";
      reply.code(200).headers(headers).send(completion);
      return { kind: "json", status: 200, headers, body: completion };
    });
  } catch (error) {
    outcomeLabel = error instanceof UpstreamError ? "upstream_error" : "error";
    throw error;
  } finally {
    deps.metrics.turns.inc({ outcome: outcomeLabel, stream: String(streaming) });
    deps.metrics.turnSeconds.observe(secondsSince(started));
  }
}
