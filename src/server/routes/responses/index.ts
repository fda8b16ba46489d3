/**
 * The Responses API over any chat completions model: `POST /v1/responses` (plain or streamed), and
 * `GET` / `DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`. A response lives in a
 * session: the `conversation`'s, its `previous_response_id`'s (a fork of it when that response is not
 * the latest of its session, or was made in a conversation), the one its headers name (as for chat
 * completions), or a new one. The turn itself is the chat proxy's (turn/run.ts); a temporary chat or
 * a front-end's side request is answered without a session.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { ThreadkeepError } from "../../../core/errors.js";
import { newSessionId } from "../../../core/ids.js";
import {
  type FoundResponse,
  findResponse,
  isHiddenCarrier,
  itemsOf,
  itemsToMessages,
  newResponseId,
  removeItems,
  RESPONSE_KEY,
  sessionOfResponse,
  type StoredResponse,
} from "../../../core/items/index.js";
import type { Memory } from "../../../core/memory/memory.js";
import { toChatMessage } from "../../../core/messages.js";
import type { ChatMessage } from "../../../core/types.js";
import type { PlannedTurn } from "../../turn/load.js";
import { itemFailures, ItemPageDoc, notFound, orNotFound, PAGE_NOTES, PageQuery, pageOf } from "../_item-pages.js";
import { clientHintOf, passThrough, sessionTargetOf, sideRequestOf } from "../../front-ends/index.js";
import {
  outputItems,
  outputMessages,
  type ResponseMeta,
  responseObject,
  statusOf,
  storedResponseObject,
  usageOf,
} from "./_object.js";
import { parseResponsesRequest, ResponsesBody, type ResponsesRequest } from "./_request.js";
import { ResponsesStream } from "./_stream.js";
import { runIdempotentTurn, type TurnDialect, type TurnRouteDeps } from "../../turn/run.js";
import { withFairShare } from "../../fair-share.js";
import { addRoute } from "../../openapi/route.js";
import { AnyObject, ok, withFailures } from "../../openapi/schemas.js";

type IdRoute = { Params: { id: string } };

const route = withFailures(itemFailures);
const IdParams = z.object({ id: z.string() });
const notes = { id: "resp_…" };

/** The contracts of the /v1/responses routes. */
export const responseContracts = {
  create: route({
    method: "POST",
    url: "/v1/responses",
    summary: "Create a response (translated to the upstream's chat completions; stream: true for Responses events)",
    body: ResponsesBody,
    responses: {
      "200": {
        description:
          "A `response` object, or with stream: true its Server-Sent Events. Header X-Session-ID names the session.",
        json: AnyObject,
        media: ["text/event-stream"],
      },
    },
  }),
  get: route({
    method: "GET",
    url: "/v1/responses/:id",
    summary: "A stored response",
    params: IdParams,
    notes,
    responses: { "200": ok("The `response` object") },
  }),
  delete: route({
    method: "DELETE",
    url: "/v1/responses/:id",
    summary: "Delete a response with its input and output items",
    params: IdParams,
    notes,
    responses: { "200": ok('`{ id, object: "response", deleted: true }`') },
  }),
  inputItems: route({
    method: "GET",
    url: "/v1/responses/:id/input_items",
    summary: "The input items of a response",
    params: IdParams,
    query: PageQuery,
    notes: { ...notes, ...PAGE_NOTES },
    responses: { "200": ok("A page of items", ItemPageDoc) },
  }),
};

/** A stored response of the caller, with its session. @throws not_found otherwise (another owner's too). */
async function loadResponse(
  memory: Memory,
  userId: string,
  id: string,
  param?: string,
): Promise<FoundResponse & { sessionId: string }> {
  const missing = () => notFound(param ? "Previous response" : "Response", id, param);
  const sessionId = sessionOfResponse(id);
  if (!sessionId) throw missing();
  const messages = await orNotFound(() => memory.getMessages(sessionId, { userId }), missing);
  const found = findResponse(messages, id);
  if (!found) throw missing();
  return { ...found, sessionId };
}

/**
 * The session a new response goes into. A `previous_response_id` chain is immutable, as at OpenAI:
 * continuing a response that is not its session's latest forks the session at that response (a new
 * chain sharing the prefix; the original session is left as it was), so two responses continuing the
 * same one are two chains. A response made in a `conversation` is forked even when it is the latest:
 * at OpenAI a conversation only takes responses that name it, not those that continue one of its responses.
 * Without either, the response goes into `named` (the session header's, or a new one).
 */
async function sessionFor(
  memory: Memory,
  request: FastifyRequest,
  parsed: ResponsesRequest,
  named: string,
): Promise<string> {
  const userId = request.userId;
  if (parsed.conversationSession) {
    const id = parsed.conversationSession;
    await orNotFound(
      () => memory.getSession(id, { userId }),
      () =>
        notFound(
          "Conversation",
          String(
            parsed.body.conversation && typeof parsed.body.conversation === "object"
              ? parsed.body.conversation.id
              : parsed.body.conversation,
          ),
          "conversation",
        ),
    );
    return id;
  }
  const previousId = parsed.previousResponseId;
  if (!previousId) return named;
  // The common case, continuing the latest response, reads one message; a branch reads the session.
  const headSession = sessionOfResponse(previousId);
  if (headSession) {
    const [last] = await orNotFound(
      () => memory.getMessages(headSession, { userId, last: 1 }),
      () => notFound("Previous response", previousId, "previous_response_id"),
    );
    const head = last?.metadata?.[RESPONSE_KEY] as StoredResponse | undefined;
    if (head?.id === previousId && !head.conversation) return headSession;
  }
  const previous = await loadResponse(memory, userId, previousId, "previous_response_id");
  if (previous.isHead && !previous.record.conversation) return previous.sessionId;
  const atSeq = previous.output.at(-1)?.seq ?? 0;
  const branch = await memory.fork(previous.sessionId, { userId, atSeq });
  return branch.id;
}

/** A request's own messages: its instructions (sent, never stored) and its input items. */
function plannedTurn(parsed: ResponsesRequest): PlannedTurn {
  const system: ChatMessage[] = parsed.echo.instructions ? [{ role: "system", content: parsed.echo.instructions }] : [];
  return { system, toStore: itemsToMessages(parsed.items) };
}

/** The `response` a request starts, in a session. */
function responseMeta(parsed: ResponsesRequest, sessionId: string, defaultModel: string | undefined): ResponseMeta {
  return {
    id: newResponseId(sessionId),
    sessionId,
    created_at: Math.floor(Date.now() / 1000),
    model: parsed.model ?? defaultModel ?? "",
    previous_response_id: parsed.previousResponseId ?? null,
    conversation: parsed.conversationSession !== undefined,
    echo: parsed.echo,
  };
}

/** The Responses dialect of a turn. */
function responsesDialect(
  parsed: ResponsesRequest,
  meta: ResponseMeta,
  defaultModel: string | undefined,
  options: { client?: TurnDialect["client"]; read?: boolean } = {},
): TurnDialect {
  const model = parsed.model ?? defaultModel;
  return {
    // On a session named by its header the input may re-send what is stored (the Agents SDK re-sends
    // its run): it is read against the stored line as a chat request is.
    input: { ...plannedTurn(parsed), read: options.read },
    client: options.client,
    model,
    stream: parsed.stream,
    persist: parsed.store,
    upstreamBody: (messages) => ({
      ...(model ? { model } : {}),
      messages,
      ...parsed.chatParams,
      ...(parsed.stream ? { stream_options: { include_usage: true } } : {}),
    }),
    complete(completion, loaded) {
      const choice = completion?.choices?.[0];
      if (!meta.model && typeof completion?.model === "string") meta.model = completion.model;
      const finish = statusOf(choice?.finish_reason);
      const output = outputItems(choice?.message, finish.status === "completed" ? "completed" : "incomplete");
      const usage = usageOf(completion?.usage);
      const completedAt = Math.floor(Date.now() / 1000);
      const state = {
        status: finish.status,
        usage,
        incomplete_details: finish.incomplete_details,
        completed_at: finish.status === "completed" ? completedAt : null,
      };
      const reply = parsed.store
        ? outputMessages(meta, output, loaded.toStore.length, { ...state, finishReason: choice?.finish_reason })
        : [];
      return { reply, body: responseObject(meta, { ...state, output }) };
    },
    streamer: (loaded) => new ResponsesStream(meta, loaded.toStore.length),
  };
}

/** Adds the /v1/responses routes. */
export function registerResponseRoutes(app: FastifyInstance, deps: TurnRouteDeps): void {
  const { memory } = deps;

  addRoute(app, responseContracts.create, async (request, reply) => {
    const parsed = parseResponsesRequest(request.body);
    if (!deps.upstream) {
      throw new ThreadkeepError(
        "upstream_not_configured",
        "No upstream model is configured: start threadkeep with --upstream <OpenAI-compatible base URL>",
      );
    }
    const target = sessionTargetOf(request.headers, deps.sessionHeaders);
    const { system, toStore } = plannedTurn(parsed);
    // The messages the upstream gets without history: the request's own.
    const own = [...system, ...toStore.filter((m) => !isHiddenCarrier(m)).map(toChatMessage)];
    const side = sideRequestOf(own, request.headers);
    const temporary = target.kind === "temporary" && !parsed.conversationSession && !parsed.previousResponseId;
    if (temporary || side) {
      // Nothing of it is kept, and the response says so (`store: false`; GET /v1/responses/{id} is a 404).
      const forgotten: ResponsesRequest = { ...parsed, store: false, echo: { ...parsed.echo, store: false } };
      const meta = responseMeta(forgotten, newSessionId(), deps.defaultModel);
      return withFairShare(deps.fairShare, request, side ? "side" : "turn", () =>
        passThrough(deps, request, reply, {
          kind: side ?? "temporary",
          dialect: responsesDialect(forgotten, meta, deps.defaultModel),
          messages: own,
        }),
      );
    }
    const named = target.kind === "session" ? target : undefined;
    // Admitted before the session is found: a refused request forks nothing.
    return withFairShare(deps.fairShare, request, "turn", async () => {
      const sessionId = await sessionFor(memory, request, parsed, named?.id ?? newSessionId());
      const meta = responseMeta(parsed, sessionId, deps.defaultModel);
      return runIdempotentTurn(deps, request, reply, {
        sessionId,
        scope: `responses\n${parsed.conversationSession ?? parsed.previousResponseId ?? (named?.given ? named.id : "")}`,
        body: parsed.body,
        dialect: responsesDialect(parsed, meta, deps.defaultModel, {
          client: clientHintOf(request.headers),
          read: named?.given === true && !parsed.conversationSession && !parsed.previousResponseId,
        }),
      });
    });
  });

  addRoute<IdRoute>(app, responseContracts.get, async (request) => {
    const found = await loadResponse(memory, request.userId, request.params.id);
    return storedResponseObject(
      found.record,
      found.sessionId,
      itemsOf(found.output).map((i) => i.item),
    );
  });

  addRoute<IdRoute>(app, responseContracts.inputItems, async (request) => {
    const found = await loadResponse(memory, request.userId, request.params.id);
    return pageOf(
      itemsOf(found.input).map((i) => i.item),
      request.query,
    );
  });

  addRoute<IdRoute>(app, responseContracts.delete, async (request) => {
    const found = await loadResponse(memory, request.userId, request.params.id);
    const seqs = new Set([...found.input, ...found.output].map((m) => m.seq));
    await removeItems(memory, found.sessionId, request.userId, (_item, seq) => seqs.has(seq));
    return { id: request.params.id, object: "response", deleted: true };
  });
}
