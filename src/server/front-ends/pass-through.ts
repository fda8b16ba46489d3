/**
 * Requests that are answered and forgotten: a front-end's side requests and temporary chats. The
 * upstream gets the request's messages exactly as sent (no history added), the client gets the
 * upstream's answer in its own dialect (streamed if it asked), and nothing is read from or written
 * to the store: no session, no lease, no `X-Session-ID`.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ChatMessage } from "../../core/types.js";
import { type ChatCompletion, type Upstream, upstreamText } from "../../llm/openai-compatible.js";
import { secondsSince } from "../metrics.js";
import type { TurnDialect, TurnRouteDeps } from "../turn/run.js";
import { streamTurn } from "../turn/stream.js";
import type { TurnDeps } from "../turn/lease.js";
import type { LoadedTurn } from "../turn/load.js";
import type { SideRequestKind } from "./side-requests.js";

/** The response header that says a request was passed through, and as what (`temporary` or a side request's kind). */
export const PASS_THROUGH_HEADER = "x-threadkeep-pass-through";

/** What is passed through. */
export interface PassThrough {
  /** `temporary` for a temporary chat, else the side request's kind. */
  kind: SideRequestKind | "temporary";
  /** How the client's API frames the request and the answer. */
  dialect: TurnDialect;
  /** The messages to send upstream, as the client sent them. */
  messages: ChatMessage[];
}

/** Answers a request from the upstream alone. */
export async function passThrough(
  deps: TurnRouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  input: PassThrough,
): Promise<FastifyReply> {
  const upstream = deps.upstream as Upstream;
  if (input.kind === "temporary") deps.metrics.temporaryRequests.inc();
  else deps.metrics.sideRequests.inc({ kind: input.kind });
  const turn: TurnDeps = { memory: deps.memory, metrics: deps.metrics, log: request.log };
  const loaded: LoadedTurn = { messages: input.messages, toStore: [], created: false, contextAvailable: true };
  const headers: Record<string, string> = { [PASS_THROUGH_HEADER]: input.kind };
  const upstreamBody = input.dialect.upstreamBody(input.messages);

  if (input.dialect.stream) {
    await streamTurn({
      turn,
      upstream,
      request,
      reply,
      sessionId: "",
      userId: request.userId,
      loaded,
      upstreamBody,
      headers,
      fence: undefined,
      record: false,
      persist: false,
      dialect: input.dialect.streamer(loaded),
      stallTimeoutMs: deps.streamStallTimeoutMs,
    });
    return reply;
  }

  const start = performance.now();
  let completion: ChatCompletion;
  try {
    completion = await upstream.chat(upstreamBody, {
      onHeaders: (upstreamHeaders) => Object.assign(headers, upstreamHeaders),
    });
  } finally {
    deps.metrics.upstreamSeconds.observe(secondsSince(start));
  }
  const answer = input.dialect.complete(completion, loaded);
  // The upstream's own bytes when the dialect answers with its reply unchanged (chat completions).
  const text = answer.body === completion ? upstreamText(completion) : undefined;
  if (text !== undefined) headers["content-type"] = "application/json; charset=utf-8";
  return reply
    .code(200)
    .headers(headers)
    .send(text ?? answer.body);
}
