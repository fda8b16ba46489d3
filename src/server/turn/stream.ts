/**
 * The streamed half of a turn: turns each upstream chat chunk into the client's events as it
 * arrives (verbatim for chat completions, Responses events for Responses: a {@link StreamDialect}),
 * accumulates the reply, and commits it when the stream ends. A client that goes away mid-stream
 * aborts the upstream call and gets what was delivered stored, marked incomplete; so does one that
 * stops reading for the stall time-out.
 *
 * Memory per stream is bounded by backpressure: when the response's buffer passes its high-water mark
 * (16 KiB) the next upstream event is not read until the client drains it, so the process holds at
 * most that plus one event; the rest waits in the sockets' kernel buffers and then upstream.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { MessageInput } from "../../core/types.js";
import {
  type CompletionUsage,
  StreamAccumulator,
  type StreamEvent,
  type Upstream,
  UpstreamError,
} from "../../llm/openai-compatible.js";
import { CLIENT_LIMIT_DEFAULTS } from "../connections.js";
import { errorBody } from "../errors.js";
import type { TurnOutcome } from "./idempotency.js";
import { secondsSince } from "../metrics.js";
import { markCommitted } from "./_idempotent-commit.js";
import { type CommitResult, commitTurn } from "./commit.js";
import type { TurnDeps } from "./lease.js";
import type { LoadedTurn } from "./load.js";
import { replyMessage } from "./reply.js";
import {
  failSpan,
  modelRequestAttributes,
  modelSpanName,
  recordModelResponse,
  startSpan,
  withSpan,
} from "../../core/tracing.js";

/** How one API frames a streamed turn. Each method returns SSE text to send ("" for nothing). */
export interface StreamDialect {
  /** Sent once the upstream accepted the request, before its first event. */
  open(): string;
  /** For one upstream event (already added to the accumulator), `[DONE]` excluded. */
  event(event: StreamEvent, accumulator: StreamAccumulator): string;
  /** The reply messages to store; `incomplete` when the client left or the upstream failed. */
  reply(accumulator: StreamAccumulator, incomplete: boolean): MessageInput[];
  /** Sent after the commit (when the client is still there). */
  close(end: StreamEnd): string;
}

/** How a streamed turn ended, for its closing frames. */
export interface StreamEnd {
  saved: boolean;
  /** Why it is not saved: `not-saved` or `save-unconfirmed`. @default "not-saved" */
  warning?: string;
  failure?: unknown;
  sawDone: boolean;
}

/** The SSE comment that carries a save warning (headers are long gone by then); empty when saved. */
export function saveWarningLine(end: StreamEnd): string {
  return end.saved ? "" : `: x-threadkeep-warning: ${end.warning ?? "not-saved"}\n\n`;
}

/** Chat completions: upstream events pass through verbatim; `[DONE]` waits for the commit. */
export const chatStreamDialect: StreamDialect = {
  open: () => "",
  event: (event) => `data: ${event.data}\n\n`,
  reply(accumulator, incomplete) {
    const answer = incomplete
      ? partialReply(accumulator)
      : replyMessage(accumulator.message(), { model: accumulator.model, finishReason: accumulator.finishReason });
    return answer ? [answer] : [];
  },
  close(end) {
    const { failure, sawDone } = end;
    let tail = "";
    if (failure !== undefined) {
      const [status, code] =
        failure instanceof UpstreamError && failure.timedOut ? [504, "upstream_timeout"] : [502, "upstream_error"];
      tail += `data: ${JSON.stringify(errorBody(status, code, `The upstream stream failed: ${(failure as Error)?.message ?? failure}`))}\n\n`;
    }
    // Headers are long gone; an SSE comment carries the warning without disturbing clients.
    tail += saveWarningLine(end);
    if (sawDone) tail += "data: [DONE]\n\n";
    return tail;
  },
};

/** Everything {@link streamTurn} needs. */
export interface StreamTurnInput {
  turn: TurnDeps;
  upstream: Upstream;
  request: FastifyRequest;
  reply: FastifyReply;
  sessionId: string;
  userId: string;
  loaded: LoadedTurn;
  upstreamBody: Record<string, unknown>;
  /** Headers to send with the stream (X-Session-ID, a warning). */
  headers: Record<string, string>;
  fence: number | undefined;
  /** Keep the events for an idempotent replay. */
  record: boolean;
  /** The store operation id of the request's Idempotency-Key, so a retry elsewhere stores nothing twice. */
  operationId?: string;
  /** Store the turn. @default true */
  persist?: boolean;
  /** How the client's events are framed. @default chatStreamDialect */
  dialect?: StreamDialect;
  /**
   * A client that reads nothing for this long while the reply waits on it is cut: the upstream call
   * is aborted and what was sent is stored, marked incomplete. @default 30000 (`CLIENT_LIMIT_DEFAULTS`)
   */
  stallTimeoutMs?: number;
}

/** How a streamed turn ended. */
export interface StreamTurnResult {
  /** For the turns metric: ok, not_saved, incomplete, upstream_error. */
  label: string;
  /** What was sent, when the turn completed. */
  outcome?: TurnOutcome;
}

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
  // Proxies such as nginx would otherwise hold events back.
  "x-accel-buffering": "no",
};

/**
 * Streams one turn. Errors before the first event (the upstream refused) are thrown, so the client
 * gets the upstream's status and body as JSON; after that, nothing throws: the response is ours.
 */
export async function streamTurn(input: StreamTurnInput): Promise<StreamTurnResult> {
  const { turn, reply, loaded } = input;
  const dialect = input.dialect ?? chatStreamDialect;
  if (clientLeft(input.request, reply)) {
    // The client gave up while waiting for its turn: nothing was delivered, so nothing is stored.
    reply.hijack();
    reply.raw.destroy();
    return { label: "incomplete" };
  }
  const abort = new AbortController();
  const upstreamStart = performance.now();
  let events: AsyncIterable<StreamEvent>;
  // The model call's span lasts until the stream ends; the request is sent with it active, so the
  // traceparent passed upstream names it.
  const model = input.upstreamBody.model;
  const modelSpan = startSpan(modelSpanName("chat", model), {
    kind: "client",
    attributes: modelRequestAttributes("chat", model, input.sessionId),
  });
  try {
    events = await withSpan(modelSpan, () =>
      input.upstream.streamChat(input.upstreamBody, {
        signal: abort.signal,
        onHeaders: (upstreamHeaders) => Object.assign(input.headers, upstreamHeaders),
      }),
    );
  } catch (error) {
    turn.metrics.upstreamSeconds.observe(secondsSince(upstreamStart));
    if (modelSpan) {
      failSpan(modelSpan, error);
      modelSpan.end();
    }
    throw error;
  }

  reply.hijack();
  const raw = reply.raw;
  const headers = { ...SSE_HEADERS, ...input.headers };
  raw.writeHead(200, headers);
  raw.flushHeaders();
  let clientGone = false;
  // A response that closes before we ended it means the client went away.
  const onClose = () => {
    if (!raw.writableEnded) {
      clientGone = true;
      abort.abort();
    }
  };
  raw.on("close", onClose);
  raw.on("error", () => {});
  // The client may have left between the check above and now, before the listener was there.
  if (clientLeft(input.request, reply)) onClose();

  const accumulator = new StreamAccumulator();
  const recorded: string[] = [];
  const stallMs = input.stallTimeoutMs ?? CLIENT_LIMIT_DEFAULTS.streamStallTimeoutMs;
  const send = async (frames: string) => {
    if (!frames || clientGone) return;
    if (input.record) recorded.push(frames);
    if (raw.write(frames) || (await drained(raw, stallMs))) return;
    // The client stopped reading: holding the turn (its lease, the upstream call) for it would let one
    // reader block its session for good. Cut it as if it had left.
    turn.metrics.clientTimeouts.inc({ kind: "stream_stall" });
    input.request.log.warn(
      { sessionId: input.sessionId, stallMs },
      "stream reader stopped reading; cut, partial reply stored as incomplete",
    );
    onClose();
    raw.destroy();
  };
  await send(dialect.open());
  let sawDone = false;
  let failure: unknown;
  let usage: CompletionUsage | undefined;
  try {
    for await (const event of events) {
      if (event.data === "[DONE]") {
        // Held back until the turn is committed: a client that saw [DONE] finds the turn stored.
        sawDone = true;
        continue;
      }
      if (clientGone) break;
      if (event.chunk?.usage) usage = event.chunk.usage;
      accumulator.add(event.chunk);
      await send(dialect.event(event, accumulator));
    }
  } catch (error) {
    if (!clientGone) failure = error;
  }
  turn.metrics.upstreamSeconds.observe(secondsSince(upstreamStart));
  if (modelSpan) {
    recordModelResponse(modelSpan, {
      model: accumulator.model,
      id: accumulator.id,
      usage,
      finishReason: accumulator.finishReason ?? undefined,
    });
    if (failure !== undefined) failSpan(modelSpan, failure);
    else if (clientGone) modelSpan.setAttribute("threadkeep.client_gone", true);
    modelSpan.end();
  }

  const incomplete = clientGone || failure !== undefined;
  const replyMessages = dialect.reply(accumulator, incomplete);
  const toCommit = markCommitted([...loaded.toStore, ...replyMessages], input.operationId);
  const committed: CommitResult =
    input.persist === false
      ? "saved"
      : await commitTurn(turn, {
          sessionId: input.sessionId,
          userId: input.userId,
          messages: toCommit,
          fence: input.fence,
          session: loaded.session,
          operationId: input.operationId,
          reconciled: loaded.reconciled,
          last: true,
        });
  const saved = committed === "saved";
  raw.off("close", onClose);

  if (failure !== undefined) {
    input.request.log.warn(
      { err: failure, sessionId: input.sessionId },
      "upstream stream failed mid-way; partial reply stored as incomplete",
    );
    turn.metrics.error(
      failure instanceof UpstreamError && failure.timedOut ? "upstream_stream_stalled" : "upstream_stream_failed",
    );
  }
  if (!raw.destroyed && !raw.writableEnded) {
    const tail = dialect.close({ saved, warning: saved ? undefined : committed, failure, sawDone });
    if (input.record) recorded.push(tail);
    raw.end(tail);
  }
  const label = incomplete
    ? clientGone
      ? "incomplete"
      : "upstream_error"
    : saved
      ? "ok"
      : committed.replace("-", "_");
  const outcome: TurnOutcome | undefined = incomplete
    ? undefined
    : {
        kind: "sse",
        status: 200,
        headers,
        events: recorded,
        ...(committed === "save-unconfirmed"
          ? { unconfirmed: { messages: toCommit, reconciled: loaded.reconciled } }
          : {}),
      };
  return { label, outcome };
}

/** The reply as far as it was delivered. Half-streamed tool calls are dropped: their arguments are cut. */
function partialReply(accumulator: StreamAccumulator): MessageInput {
  const message: MessageInput = { role: "assistant", content: accumulator.content, incomplete: true };
  if (accumulator.model) message.metadata = { model: accumulator.model };
  return message;
}

function clientLeft(request: FastifyRequest, reply: FastifyReply): boolean {
  return reply.raw.destroyed || request.raw.socket?.destroyed === true;
}

/** Waits for the response to drain or close. @returns false when neither came within `timeoutMs`. */
function drained(raw: FastifyReply["raw"], timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    if (raw.destroyed) return resolve(true);
    const done = (ok: boolean) => {
      clearTimeout(timer);
      raw.off("drain", onDone);
      raw.off("close", onDone);
      resolve(ok);
    };
    const onDone = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    raw.on("drain", onDone);
    raw.on("close", onDone);
  });
}
