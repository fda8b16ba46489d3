/**
 * The session REST API under /v1/sessions. Every route acts for the authenticated user only: another
 * owner's session is `session_not_found`, exactly like a missing one.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parseContextPreferences } from "../../core/context/preferences.js";
import type { ContextPreferences } from "../../core/context/types.js";
import { parseConversationState } from "../../core/state/conversation.js";
import type { Memory } from "../../core/memory/memory.js";
import { parseBody } from "./_validate.js";
import { DEFAULT_NEIGHBOURS, ListQuery, MessagesQuery, SEARCH_NOTES, SearchParams } from "../queries.js";
import type { ServerMetrics } from "../metrics.js";
import { sessionOverviews } from "./_session-overview.js";
import { type TurnDeps, withTurnLease } from "../turn/lease.js";
import { addRoute, shownAs } from "../openapi/route.js";
import {
  AssembledContext,
  ChatMessage,
  ContextPreferences as PreferencesBody,
  Deleted,
  error,
  listOf,
  Message,
  ok,
  Session,
  SessionId,
  SessionPage,
  SessionParams,
  SessionState,
  SearchHit,
  sessionFailures,
  withFailures,
} from "../openapi/schemas.js";

type IdParams = { Params: { id: string } };

/** The listing route's query: paging, and `overview=true` for titles and message counts. */
const ListRouteQuery = ListQuery.extend({ overview: z.enum(["true", "false"]).optional() });
const CreateBody = z
  .strictObject({ id: SessionId.optional(), metadata: z.record(z.string(), z.unknown()).optional() })
  .default({});
const AppendBody = z.strictObject({
  // Each message is checked by core (validateMessages); the document shows its shape.
  messages: z.array(shownAs(z.unknown(), ChatMessage)).min(1, "at least one message is required"),
});
const ContextQuery = z.object({
  model: z.string().optional(),
  window: z.coerce.number().int().min(0).max(1000).optional(),
  tokenBudget: z.coerce.number().int().min(1).max(10_000_000).optional(),
  /** A next user message to preview the turn with: what recall brings back and how memories rank. */
  message: z.string().min(1).max(10_000).optional(),
});
const StatePatch = z.strictObject({
  data: z.record(z.string(), z.unknown()),
  expectedVersion: z.number().int().min(0).optional(),
});
const route = withFailures(sessionFailures);

/** The contracts of the /v1/sessions routes (and of search in one session). */
export const sessionContracts = {
  list: route({
    method: "GET",
    url: "/v1/sessions",
    summary: "The caller's sessions, newest activity first",
    query: ListRouteQuery,
    notes: {
      limit: "Page size",
      cursor: "nextCursor of the previous page",
      overview:
        "true: each session also has title (its first user message) and messageCount, and the page names the store",
    },
    responses: { "200": ok("A page", SessionPage) },
  }),
  create: route({
    method: "POST",
    url: "/v1/sessions",
    summary: "Create a session",
    body: CreateBody,
    responses: { "201": ok("Created", Session), "200": ok("Already existed (same owner)", Session) },
  }),
  get: route({
    method: "GET",
    url: "/v1/sessions/:id",
    summary: "A session",
    params: SessionParams,
    responses: { "200": ok("The session", Session) },
  }),
  delete: route({
    method: "DELETE",
    url: "/v1/sessions/:id",
    summary: "Delete a session with its messages, summaries and state",
    params: SessionParams,
    responses: { "200": ok("Deleted", Deleted) },
  }),
  messages: route({
    method: "GET",
    url: "/v1/sessions/:id/messages",
    summary: "Messages, oldest first",
    params: SessionParams,
    query: MessagesQuery,
    notes: { after: "Only messages with seq > after", limit: "Page size" },
    responses: {
      "200": ok(
        "A page",
        z.object({ data: z.array(Message), hasMore: z.boolean(), nextAfter: z.int().nullable() }).partial(),
      ),
    },
  }),
  append: route({
    method: "POST",
    url: "/v1/sessions/:id/messages",
    summary: "Append messages without calling a model (creates the session if missing)",
    params: SessionParams,
    body: AppendBody,
    responses: { "201": ok("Stored", listOf(Message)) },
  }),
  search: route({
    method: "GET",
    url: "/v1/sessions/:id/search",
    summary: "Search the session's messages, newest first",
    params: SessionParams,
    query: SearchParams,
    notes: { ...SEARCH_NOTES, mode: "as for /v1/search; default substring" },
    responses: { "200": ok("Hits", listOf(SearchHit)) },
  }),
  context: route({
    method: "GET",
    url: "/v1/sessions/:id/context",
    summary: "The context the next turn would send, with what was left out",
    params: SessionParams,
    query: ContextQuery,
    notes: {
      model: "Model for token counting",
      window: "Preview with this message window (nothing is stored)",
      tokenBudget: "Preview with this token budget (nothing is stored)",
      message:
        "Preview the turn of this user message (what recall brings back, how memories rank against it); nothing is stored",
    },
    responses: { "200": ok("Assembled context", AssembledContext) },
  }),
  state: route({
    method: "GET",
    url: "/v1/sessions/:id/state",
    summary: "Session state",
    params: SessionParams,
    responses: { "200": ok("State", SessionState) },
  }),
  patchState: route({
    method: "PATCH",
    url: "/v1/sessions/:id/state",
    summary: "Merge into session state (null removes a key)",
    params: SessionParams,
    body: StatePatch,
    responses: {
      "200": ok("New state", SessionState),
      "409": error("expectedVersion did not match (`state_conflict`)"),
    },
  }),
  preferences: route({
    method: "PUT",
    url: "/v1/sessions/:id/preferences",
    summary: "Set context preferences applied to the next turn(s)",
    params: SessionParams,
    // Checked by memory.setPreferences with this schema.
    body: PreferencesBody,
    responses: { "200": ok("Stored", z.object({ preferences: PreferencesBody }).partial()) },
  }),
};

/** What the session routes need. */
export interface SessionRoutesDeps {
  memory: Memory;
  metrics: ServerMetrics;
}

/** Applies a JSON merge patch (RFC 7396) to the top level of session state: `null` removes a key. */
export function mergeState(data: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const next = { ...data };
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete next[key];
    else next[key] = value;
  }
  return next;
}

/** Adds the /v1/sessions routes. */
export function registerSessionRoutes(app: FastifyInstance, deps: SessionRoutesDeps): void {
  const { memory } = deps;
  const owner = (request: { userId: string }) => ({ userId: request.userId });
  // Routes that read or change an existing session must not create it, unlike a chat turn.
  const existing = (id: string, userId: string) => memory.getSession(id, { userId });

  addRoute(app, sessionContracts.list, async (request) => {
    const query = parseBody(ListRouteQuery, request.query);
    const page = await memory.listSessions({ ...owner(request), limit: query.limit, cursor: query.cursor });
    const more = { nextCursor: page.nextCursor, hasMore: page.nextCursor !== null };
    if (query.overview !== "true") return { data: page.sessions, ...more };
    const store = await memory.store();
    return { data: await sessionOverviews(store, page.sessions), ...more, store: store.name };
  });

  addRoute(app, sessionContracts.create, async (request, reply) => {
    const body = parseBody(CreateBody, request.body);
    let isNew = true;
    if (body.id) {
      isNew = await existing(body.id, request.userId).then(
        () => false,
        (error) => {
          if ((error as { code?: string }).code === "session_not_found") return true;
          throw error;
        },
      );
    }
    const handle = await memory.startSession({ ...owner(request), id: body.id, metadata: body.metadata });
    const session = await memory.getSession(handle.id, owner(request));
    return reply
      .code(isNew ? 201 : 200)
      .header("x-session-id", session.id)
      .send(session);
  });

  addRoute<IdParams>(app, sessionContracts.get, async (request) => existing(request.params.id, request.userId));

  addRoute<IdParams>(app, sessionContracts.delete, async (request) => {
    await memory.deleteSession(request.params.id, owner(request));
    return { id: request.params.id.toLowerCase(), deleted: true };
  });

  addRoute<IdParams>(app, sessionContracts.messages, async (request) => {
    const query = parseBody(MessagesQuery, request.query);
    const rows = await memory.getMessages(request.params.id, {
      ...owner(request),
      afterSeq: query.after,
      limit: query.limit + 1,
    });
    const hasMore = rows.length > query.limit;
    const data = hasMore ? rows.slice(0, query.limit) : rows;
    return { data, hasMore, nextAfter: hasMore ? data[data.length - 1].seq : null };
  });

  addRoute<IdParams>(app, sessionContracts.append, async (request, reply) => {
    const body = parseBody(AppendBody, request.body);
    const turn: TurnDeps = { memory, metrics: deps.metrics, log: request.log };
    // Appends queue with chat turns, so a turn in flight is never interleaved.
    const stored = await withTurnLease(turn, request.params.id, (fence) =>
      memory.addMessages(request.params.id, body.messages as never, { ...owner(request), fence }),
    );
    return reply.code(201).send({ data: stored });
  });

  addRoute<IdParams>(app, sessionContracts.search, async (request) => {
    const query = parseBody(SearchParams, request.query);
    const hits = await memory.search(query.q, {
      ...owner(request),
      sessionId: request.params.id,
      limit: query.limit,
      mode: query.mode,
      ranking: query.ranking,
      neighbours: query.neighbours ?? DEFAULT_NEIGHBOURS,
    });
    return { data: hits };
  });

  addRoute<IdParams>(app, sessionContracts.context, async (request) => {
    const query = parseBody(ContextQuery, request.query);
    // Stored preferences are passed in explicitly: a preview applies them without using them up.
    const preferences = await memory.getPreferences(request.params.id, owner(request));
    // window and tokenBudget preview another shape of the same context; nothing is stored.
    return memory.buildContext(request.params.id, {
      ...owner(request),
      model: query.model,
      window: query.window,
      tokenBudget: query.tokenBudget,
      preferences,
      // A next user message to preview the turn with: what recall brings back
      // for it, and how the memories rank against it. Nothing is stored.
      ...(query.message ? { input: [{ role: "user" as const, content: query.message }] } : {}),
    });
  });

  addRoute<IdParams>(app, sessionContracts.state, async (request) =>
    memory.getState(request.params.id, owner(request)),
  );

  addRoute<IdParams>(app, sessionContracts.patchState, async (request) => {
    const body = parseBody(StatePatch, request.body);
    await existing(request.params.id, request.userId);
    // The keys threadkeep itself reads must keep their shape; anything else is the application's.
    if (body.data.conversation != null) parseConversationState(body.data.conversation);
    if (body.data.preferences != null) parseContextPreferences(body.data.preferences);
    return memory.updateState(request.params.id, (data) => mergeState(data, body.data), {
      ...owner(request),
      expectedVersion: body.expectedVersion,
    });
  });

  addRoute<IdParams>(app, sessionContracts.preferences, async (request) => {
    await existing(request.params.id, request.userId);
    const stored = await memory.setPreferences(request.params.id, request.body as ContextPreferences, owner(request));
    return { preferences: stored ?? {} };
  });
}
