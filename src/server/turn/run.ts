/**
 * One proxied turn, whatever API the client speaks: idempotent replay, the session's turn lease,
 * loading the context, the upstream chat completion (streamed or not), the commit, and the
 * degradations and warnings. A dialect (chat completions, Responses) says only how its request
 * becomes messages and how the reply goes back.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Memory } from "../../core/memory/memory.js";
import type { ClientMode } from "../../core/reconcile.js";
import type { ChatMessage, MessageInput } from "../../core/types.js";
import { type ChatCompletion, type Upstream, UpstreamError, upstreamText } from "../../llm/openai-compatible.js";
import { committedCompletion, markCommitted, operationIdOf } from "./_idempotent-commit.js";
import { fingerprintOf, type IdempotencyCache, type TurnOutcome } from "./idempotency.js";
import { secondsSince, type ServerMetrics } from "../metrics.js";
import { saveWarningLine, type StreamDialect, streamTurn } from "./stream.js";
import { type CommitResult, commitTurn } from "./commit.js";
import { type TurnDeps, withTurnLease } from "./lease.js";
import { type LoadedTurn, loadTurn, type PlannedTurn } from "./load.js";
import type { FairShare } from "../fair-share.js";
import {
  incomingContext,
  inSpan,
  modelRequestAttributes,
  modelSpanName,
  recordModelResponse,
} from "../../core/tracing.js";

/** The header that carries the session id, both ways. */
export const SESSION_HEADER = "x-session-id";
/** The header that reports a degraded turn: `context-unavailable`, `not-saved`, `save-unconfirmed`, `input-truncated`, `history-omitted`. */
export const WARNING_HEADER = "x-threadkeep-warning";

/** What every turn route needs. */
export interface TurnRouteDeps {
  memory: Memory;
  metrics: ServerMetrics;
  upstream?: Upstream;
  idempotency: IdempotencyCache;
  /** Model used when a request names none. */
  defaultModel?: string;
  /** The request headers that name the session, in order. @default DEFAULT_SESSION_HEADERS */
  sessionHeaders?: readonly string[];
  /** Per-user and per-key limits on model requests; none when absent. */
  fairShare?: FairShare;
  /** Called after a turn is committed (`--memories auto` queues the session for extraction). */
  afterCommit?: (userId: string, sessionId: string) => void;
  /** A streamed reply not read for this long is cut and its turn stored incomplete. */
  streamStallTimeoutMs?: number;
}

/** How one API drives the shared turn. */
export interface TurnDialect {
  /** The client's messages (split as a chat request), or the turn's planned messages. */
  input: ChatMessage[] | PlannedTurn;
  model?: string;
  stream: boolean;
  /**
   * How the client sends history, when it says (`X-Threadkeep-Client`) or its front-end is known
   * (`X-OpenWebUI-Chat-Id`): every request the whole conversation, or only the new turn (see
   * `core/reconcile.ts`).
   */
  client?: ClientMode;
  /** Store the turn (a Responses request with `store: false` does not). @default true */
  persist?: boolean;
  /** The upstream chat completions body around the assembled messages. */
  upstreamBody(messages: ChatMessage[]): Record<string, unknown>;
  /**
   * A complete upstream reply: the reply messages to store, and the body to answer with. A body that is
   * the reply object itself is sent as the bytes the upstream sent: return it only unchanged.
   */
  complete(completion: ChatCompletion, loaded: LoadedTurn): { reply: MessageInput[]; body: unknown };
  /** How a streamed reply is framed. */
  streamer(loaded: LoadedTurn): StreamDialect;
}

/** Adds a warning to the X-Threadkeep-Warning list of a response. */
export function addWarning(headers: Record<string, string>, warning: string): void {
  headers[WARNING_HEADER] = headers[WARNING_HEADER] ? `${headers[WARNING_HEADER]}, ${warning}` : warning;
}

export const headerValue = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/** Sends a recorded outcome again (an idempotent retry). */
function replay(reply: FastifyReply, outcome: TurnOutcome): void {
  const headers = { ...outcome.headers, "idempotent-replayed": "true" };
  if (outcome.kind === "json") {
    reply.code(outcome.status).headers(headers).send(outcome.body);
    return;
  }
  reply.hijack();
  reply.raw.writeHead(outcome.status, headers);
  reply.raw.end(outcome.events.join(""));
}

/**
 * Runs a turn, or replays it when the request carries an `Idempotency-Key` already used (by this
 * user, in this scope) for the same body. `scope` keeps keys of different sessions apart.
 */
export async function runIdempotentTurn(
  deps: TurnRouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  turn: { sessionId: string; scope: string; body: unknown; dialect: TurnDialect },
): Promise<FastifyReply> {
  const key = headerValue(request.headers["idempotency-key"]);
  if (!key) {
    await runProxiedTurn(deps, { request, reply, sessionId: turn.sessionId, dialect: turn.dialect });
    return reply;
  }
  // The in-process cache replays a retry on this process; the operation id, one on another process.
  const operationId = operationIdOf(request.userId, turn.scope, key);
  const ticket = await deps.idempotency.begin(`${request.userId}\n${turn.scope}\n${key}`, fingerprintOf(turn.body));
  if (!ticket.first) {
    if (ticket.outcome.unconfirmed) await confirmSave(deps, request, turn.sessionId, ticket.outcome, operationId);
    replay(reply, ticket.outcome);
    return reply;
  }
  let outcome: TurnOutcome | undefined;
  try {
    outcome = await runProxiedTurn(deps, {
      request,
      reply,
      sessionId: turn.sessionId,
      dialect: turn.dialect,
      record: true,
      operationId,
    });
  } finally {
    ticket.settle(outcome);
  }
  return reply;
}

/**
 * Saves the turn of a recorded outcome whose save was unconfirmed, in line with the session's turns;
 * the operation id makes it a no-op if the first save did land. Once saved, the outcome (and every
 * later replay) no longer carries the warning.
 */
async function confirmSave(
  deps: TurnRouteDeps,
  request: FastifyRequest,
  sessionId: string,
  outcome: TurnOutcome,
  operationId: string,
): Promise<void> {
  const unconfirmed = outcome.unconfirmed;
  if (!unconfirmed) return;
  const turn: TurnDeps = {
    memory: deps.memory,
    metrics: deps.metrics,
    log: request.log,
    afterCommit: deps.afterCommit,
  };
  const committed = await withTurnLease(turn, sessionId, (fence) =>
    commitTurn(turn, {
      sessionId,
      userId: request.userId,
      messages: unconfirmed.messages,
      fence,
      operationId,
      reconciled: unconfirmed.reconciled,
      last: true,
    }),
  );
  if (committed !== "saved" || outcome.unconfirmed !== unconfirmed) return;
  outcome.unconfirmed = undefined;
  const rest = (outcome.headers[WARNING_HEADER] ?? "").split(", ").filter((w) => w && w !== "save-unconfirmed");
  if (rest.length > 0) outcome.headers[WARNING_HEADER] = rest.join(", ");
  else delete outcome.headers[WARNING_HEADER];
  if (outcome.kind === "sse") {
    outcome.events = outcome.events.map((e) =>
      e.replace(saveWarningLine({ saved: false, warning: "save-unconfirmed", sawDone: false }), ""),
    );
  }
}

/** What {@link runProxiedTurn} runs. */
export interface ProxiedTurnOptions {
  request: FastifyRequest;
  reply: FastifyReply;
  sessionId: string;
  dialect: TurnDialect;
  /** Keep what is sent, for an idempotent replay. @default false */
  record?: boolean;
  /** The store operation id of the request's Idempotency-Key, so a retry elsewhere stores nothing twice. */
  operationId?: string;
}

/**
 * One proxied turn under the session's lease (not `Memory.runTurn`, which only holds the lease: this
 * is the whole HTTP turn). Answers the client itself and returns what it sent (for idempotent
 * replay) when the turn succeeded.
 */
export async function runProxiedTurn(
  deps: TurnRouteDeps,
  options: ProxiedTurnOptions,
): Promise<TurnOutcome | undefined> {
  const { request, reply, sessionId, dialect, operationId } = options;
  const record = options.record ?? false;
  const upstream = deps.upstream as Upstream;
  const turn: TurnDeps = {
    memory: deps.memory,
    metrics: deps.metrics,
    log: request.log,
    afterCommit: deps.afterCommit,
  };
  const userId = request.userId;
  const started = performance.now();
  const streaming = dialect.stream;
  let outcomeLabel = "error";
  // The turn's span continues the caller's trace when the request carries a W3C traceparent.
  const spanOptions = {
    kind: "server" as const,
    parent: incomingContext(request.headers),
    attributes: { "gen_ai.conversation.id": sessionId, "threadkeep.stream": streaming },
  };
  return inSpan("threadkeep.turn", spanOptions, async (span) => {
    try {
      return await withTurnLease(
        turn,
        sessionId,
        async (fence, preloaded) => {
          const loaded = await loadTurn(turn, {
            sessionId,
            userId,
            request: dialect.input,
            model: dialect.model,
            preloaded,
            client: dialect.client,
          });
          const headers: Record<string, string> = { [SESSION_HEADER]: sessionId };
          if (!loaded.contextAvailable) addWarning(headers, "context-unavailable");
          if (loaded.truncated) addWarning(headers, "input-truncated");
          for (const warning of loaded.warnings ?? []) addWarning(headers, warning);
          const upstreamBody = dialect.upstreamBody(loaded.messages);

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
              operationId,
              persist: dialect.persist,
              dialect: dialect.streamer(loaded),
              stallTimeoutMs: deps.streamStallTimeoutMs,
            });
            outcomeLabel = result.label;
            return result.outcome;
          }

          const earlier =
            operationId && dialect.persist !== false
              ? await committedCompletion(deps.memory, sessionId, userId, operationId)
              : null;
          if (earlier) {
            // An attempt of this request committed on another process: answer with what it stored.
            const replayed = { ...headers, "idempotent-replayed": "true" };
            const body = dialect.complete(earlier, loaded).body;
            outcomeLabel = "ok";
            reply.code(200).headers(replayed).send(body);
            return { kind: "json", status: 200, headers: replayed, body };
          }
          const upstreamStart = performance.now();
          let completion: ChatCompletion;
          try {
            completion = await inSpan(
              modelSpanName("chat", upstreamBody.model),
              { kind: "client", attributes: modelRequestAttributes("chat", upstreamBody.model, sessionId) },
              async (modelSpan) => {
                const answered = await upstream.chat(upstreamBody, {
                  onHeaders: (upstreamHeaders) => Object.assign(headers, upstreamHeaders),
                });
                recordModelResponse(modelSpan, {
                  model: answered?.model,
                  id: answered?.id,
                  usage: answered?.usage,
                  finishReason: answered?.choices?.[0]?.finish_reason,
                });
                return answered;
              },
            );
          } finally {
            deps.metrics.upstreamSeconds.observe(secondsSince(upstreamStart));
          }
          const answer = dialect.complete(completion, loaded);
          const messages = markCommitted([...loaded.toStore, ...answer.reply], operationId);
          const committed: CommitResult =
            dialect.persist === false
              ? "saved"
              : await commitTurn(turn, {
                  sessionId,
                  userId,
                  messages,
                  fence,
                  session: loaded.session,
                  operationId,
                  reconciled: loaded.reconciled,
                  last: true,
                });
          if (committed !== "saved") addWarning(headers, committed);
          outcomeLabel = committed === "saved" ? "ok" : committed.replace("-", "_");
          // A dialect that answers with the upstream's reply unchanged sends its bytes as they came
          // (as a stream's events are), not a serialisation of what they were parsed into.
          const text = answer.body === completion ? upstreamText(completion) : undefined;
          if (text !== undefined) headers["content-type"] = "application/json; charset=utf-8";
          const body = text ?? answer.body;
          reply.code(200).headers(headers).send(body);
          return {
            kind: "json",
            status: 200,
            headers,
            body,
            ...(committed === "save-unconfirmed" ? { unconfirmed: { messages, reconciled: loaded.reconciled } } : {}),
          };
        },
        userId,
      );
    } catch (error) {
      outcomeLabel = error instanceof UpstreamError ? "upstream_error" : "error";
      throw error;
    } finally {
      span?.setAttribute("threadkeep.outcome", outcomeLabel);
      deps.metrics.turns.inc({ outcome: outcomeLabel, stream: String(streaming) });
      deps.metrics.turnSeconds.observe(secondsSince(started));
    }
  });
}
