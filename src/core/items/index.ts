/** Responses / Conversations items and their one conversion to and from chat messages. */
export type {
  FunctionCallItem,
  FunctionCallOutputItem,
  Item,
  ItemContentPart,
  ItemEntry,
  MessageItem,
  OtherItem,
} from "./types.js";
export { ITEMS_KEY } from "./types.js";
export { newItemId, normalizeInput, normalizeItem } from "./normalize.js";
export { isHiddenCarrier, itemsToMessages, messageToItems } from "./convert.js";
export { conversationIdOf, newResponseId, sessionOfConversation, sessionOfResponse } from "./ids.js";
export {
  type FoundResponse,
  findResponse,
  itemsOf,
  removeItems,
  RESPONSE_KEY,
  type SeqItem,
  type StoredResponse,
} from "./session-items.js";
