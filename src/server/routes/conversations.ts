/**
 * The Conversations API: a conversation is a threadkeep session (`conv_<hex>` names it), its items
 * are the session's messages read as items (core/items), so a conversation and its session are one
 * thing seen through two APIs (also `/v1/sessions`, the CLI, export and migrate). Every route acts
 * for the authenticated user: another owner's conversation is not found.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { conversationIdOf, itemsOf, itemsToMessages, normalizeInput, removeItems, sessionOfConversation } from "../../core/items/index.js";
import type { Memory } from "../../core/memory/memory.js";
import type { Session } from "../../core/types.js";
import { itemList, notFound, orNotFound, pageOf } from "./_item-pages.js";
import { parseBody } from "./_validate.js";

type IdParams = { Params: { id: string } };
type ItemParams = { Params: { id: string; item_id: string } };

const Metadata = z.record(z.string(), z.string().max(512)).refine((m) => Object.keys(m).length <= 16, "at most 16 keys");
const CreateBody = z.looseObject({ items: z.array(z.unknown()).nullish(), metadata: Metadata.nullish() }).nullish();
const UpdateBody = z.looseObject({ metadata: Metadata.nullable() });
const ItemsBody = z.looseObject({ items: z.array(z.unknown()).min(1, "at least one item is required") });

/** The `conversation` object of a session. */
export function conversationObject(session: Session): Record<string, unknown> {
  return { id: conversationIdOf(session.id), object: "conversation", created_at: Math.floor(session.createdAt / 1000), metadata: session.metadata };
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

  app.post("/v1/conversations", async (request) => {
    const body = parseBody(CreateBody, request.body) ?? {};
    const items = body.items ? normalizeInput(body.items, "items") : [];
    const userId = request.userId;
    const handle = await memory.startSession({ userId, metadata: body.metadata ?? {} });
    if (items.length > 0) await memory.addMessages(handle.id, itemsToMessages(items), { userId });
    return conversationObject(await memory.getSession(handle.id, { userId }));
  });

  app.get<IdParams>("/v1/conversations/:id", async (request) => conversationObject(await conversation(request.params.id, request.userId)));

  app.post<IdParams>("/v1/conversations/:id", async (request) => {
    const body = parseBody(UpdateBody, request.body);
    const session = await conversation(request.params.id, request.userId);
    return conversationObject(await memory.updateSessionMetadata(session.id, body.metadata ?? {}, { userId: request.userId }));
  });

  app.delete<IdParams>("/v1/conversations/:id", async (request) => {
    const session = await conversation(request.params.id, request.userId);
    await memory.deleteSession(session.id, { userId: request.userId });
    return { id: conversationIdOf(session.id), object: "conversation.deleted", deleted: true };
  });

  app.post<IdParams>("/v1/conversations/:id/items", async (request) => {
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

  app.get<IdParams>("/v1/conversations/:id/items", async (request) => {
    const session = await conversation(request.params.id, request.userId);
    const messages = await memory.getMessages(session.id, { userId: request.userId });
    return pageOf(itemsOf(messages).map((i) => i.item), request.query);
  });

  app.get<ItemParams>("/v1/conversations/:id/items/:item_id", async (request) => {
    const session = await conversation(request.params.id, request.userId);
    const messages = await memory.getMessages(session.id, { userId: request.userId });
    const found = itemsOf(messages).find((i) => i.item.id === request.params.item_id);
    if (!found) throw notFound("Item", request.params.item_id);
    return found.item;
  });

  app.delete<ItemParams>("/v1/conversations/:id/items/:item_id", async (request) => {
    const userId = request.userId;
    const session = await conversation(request.params.id, userId);
    const removed = await removeItems(memory, session.id, userId, (item) => item.id === request.params.item_id);
    if (removed === 0) throw notFound("Item", request.params.item_id);
    return conversationObject(await memory.getSession(session.id, { userId }));
  });
}
