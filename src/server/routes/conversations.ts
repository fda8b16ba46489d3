/**
 * The Conversations API: a conversation is a threadkeep session (`conv_<hex>` names it), its items
 * are the session's messages read as items (core/items), so a conversation and its session are one
 * thing seen through two APIs (also `/v1/sessions`, the CLI, export and migrate). Every route acts
 * for the authenticated user: another owner's conversation is not found.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import {
  conversationIdOf,
  itemsOf,
  itemsToMessages,
  normalizeInput,
  removeItems,
  sessionOfConversation,
} from "../../core/items/index.js";
import type { Memory } from "../../core/memory/memory.js";
import type { Session } from "../../core/types.js";
import {
  itemFailures,
  ItemPageDoc,
  itemList,
  Metadata,
  notFound,
  orNotFound,
  PAGE_NOTES,
  PageQuery,
  pageOf,
} from "./_item-pages.js";
import { parseBody } from "./_validate.js";
import { addRoute } from "../openapi/route.js";
import { ok, withFailures } from "../openapi/schemas.js";

type IdRoute = { Params: { id: string } };
type ItemRoute = { Params: { id: string; item_id: string } };

const CreateBody = z.looseObject({ items: z.array(z.unknown()).nullish(), metadata: Metadata.nullish() }).nullish();
const UpdateBody = z.looseObject({ metadata: Metadata.nullable() });
const ItemsBody = z.looseObject({ items: z.array(z.unknown()).min(1, "at least one item is required") });

const route = withFailures(itemFailures);
const IdParams = z.object({ id: z.string() });
const ItemParams = IdParams.extend({ item_id: z.string() });
const notes = { id: "conv_… (or a session id)", item_id: "Item id" };
const conversationObjectDoc = ok("The `conversation` object");

/** The contracts of the /v1/conversations routes. */
export const conversationContracts = {
  create: route({
    method: "POST",
    url: "/v1/conversations",
    summary: "Create a conversation (a threadkeep session)",
    body: CreateBody,
    responses: { "200": conversationObjectDoc },
  }),
  get: route({
    method: "GET",
    url: "/v1/conversations/:id",
    summary: "A conversation",
    params: IdParams,
    notes,
    responses: { "200": conversationObjectDoc },
  }),
  update: route({
    method: "POST",
    url: "/v1/conversations/:id",
    summary: "Replace a conversation's metadata",
    params: IdParams,
    notes,
    body: UpdateBody,
    responses: { "200": conversationObjectDoc },
  }),
  delete: route({
    method: "DELETE",
    url: "/v1/conversations/:id",
    summary: "Delete a conversation and its session",
    params: IdParams,
    notes,
    responses: { "200": ok('`{ id, object: "conversation.deleted", deleted: true }`') },
  }),
  addItems: route({
    method: "POST",
    url: "/v1/conversations/:id/items",
    summary: "Add items to a conversation",
    params: IdParams,
    notes,
    body: ItemsBody,
    responses: { "200": ok("The added items", ItemPageDoc) },
  }),
  items: route({
    method: "GET",
    url: "/v1/conversations/:id/items",
    summary: "A conversation's items",
    params: IdParams,
    query: PageQuery,
    notes: { ...notes, ...PAGE_NOTES },
    responses: { "200": ok("A page of items", ItemPageDoc) },
  }),
  item: route({
    method: "GET",
    url: "/v1/conversations/:id/items/:item_id",
    summary: "One item",
    params: ItemParams,
    notes,
    responses: { "200": ok("The item") },
  }),
  deleteItem: route({
    method: "DELETE",
    url: "/v1/conversations/:id/items/:item_id",
    summary: "Delete one item",
    params: ItemParams,
    notes,
    responses: { "200": conversationObjectDoc },
  }),
};

/** The `conversation` object of a session. */
export function conversationObject(session: Session): Record<string, unknown> {
  return {
    id: conversationIdOf(session.id),
    object: "conversation",
    created_at: Math.floor(session.createdAt / 1000),
    metadata: session.metadata,
  };
}

/** Adds the /v1/conversations routes. */
export function registerConversationRoutes(app: FastifyInstance, deps: { memory: Memory }): void {
  const { memory } = deps;
  /** The caller's session of a conversation id. @throws not_found (another owner's too). */
  const conversation = async (id: string, userId: string) => {
    const missing = () => notFound("Conversation", id);
    let sessionId: string;
    try {
      sessionId = sessionOfConversation(id);
    } catch {
      // In a path, an id that cannot be one of ours is simply not found.
      throw missing();
    }
    return orNotFound(() => memory.getSession(sessionId, { userId }), missing);
  };

  addRoute(app, conversationContracts.create, async (request) => {
    const body = parseBody(CreateBody, request.body) ?? {};
    const items = body.items ? normalizeInput(body.items, "items") : [];
    const userId = request.userId;
    const handle = await memory.startSession({ userId, metadata: body.metadata ?? {} });
    if (items.length > 0) await memory.addMessages(handle.id, itemsToMessages(items), { userId });
    return conversationObject(await memory.getSession(handle.id, { userId }));
  });

  addRoute<IdRoute>(app, conversationContracts.get, async (request) =>
    conversationObject(await conversation(request.params.id, request.userId)),
  );

  addRoute<IdRoute>(app, conversationContracts.update, async (request) => {
    const body = parseBody(UpdateBody, request.body);
    const session = await conversation(request.params.id, request.userId);
    return conversationObject(
      await memory.updateSessionMetadata(session.id, body.metadata ?? {}, { userId: request.userId }),
    );
  });

  addRoute<IdRoute>(app, conversationContracts.delete, async (request) => {
    const session = await conversation(request.params.id, request.userId);
    await memory.deleteSession(session.id, { userId: request.userId });
    return { id: conversationIdOf(session.id), object: "conversation.deleted", deleted: true };
  });

  addRoute<IdRoute>(app, conversationContracts.addItems, async (request) => {
    const body = parseBody(ItemsBody, request.body);
    const items = normalizeInput(body.items, "items");
    const userId = request.userId;
    const session = await conversation(request.params.id, userId);
    // Under the turn lease, so items never land in the middle of a turn.
    const added = await memory.runTurn(session.id, (lease) =>
      memory.addMessages(session.id, itemsToMessages(items), { userId, fence: lease.fence, session }),
    );
    return itemList(itemsOf(added).map((i) => i.item));
  });

  addRoute<IdRoute>(app, conversationContracts.items, async (request) => {
    const session = await conversation(request.params.id, request.userId);
    const messages = await memory.getMessages(session.id, { userId: request.userId });
    return pageOf(
      itemsOf(messages).map((i) => i.item),
      request.query,
    );
  });

  addRoute<ItemRoute>(app, conversationContracts.item, async (request) => {
    const session = await conversation(request.params.id, request.userId);
    const messages = await memory.getMessages(session.id, { userId: request.userId });
    const found = itemsOf(messages).find((i) => i.item.id === request.params.item_id);
    if (!found) throw notFound("Item", request.params.item_id);
    return found.item;
  });

  addRoute<ItemRoute>(app, conversationContracts.deleteItem, async (request) => {
    const userId = request.userId;
    const session = await conversation(request.params.id, userId);
    const removed = await removeItems(memory, session.id, userId, (item) => item.id === request.params.item_id);
    if (removed === 0) throw notFound("Item", request.params.item_id);
    return conversationObject(await memory.getSession(session.id, { userId }));
  });
}
