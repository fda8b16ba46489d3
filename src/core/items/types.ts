/**
 * Items of the OpenAI Responses and Conversations APIs, as threadkeep stores and serves them. The
 * shapes follow the `openai` package's `ResponseItem` / `ConversationItem`; fields threadkeep does
 * not interpret are kept as they came.
 */

/** A content part of a message item (`input_text`, `output_text`, `input_image`, `refusal`, …). */
export interface ItemContentPart {
  type: string;
  text?: string;
  [extra: string]: unknown;
}

/** A `message` item. */
export interface MessageItem {
  id: string;
  type: "message";
  role: "user" | "assistant" | "system" | "developer";
  content: ItemContentPart[];
  status: "in_progress" | "completed" | "incomplete";
  [extra: string]: unknown;
}

/** A `function_call` item: the model asks the client to run a function. */
export interface FunctionCallItem {
  id: string;
  type: "function_call";
  call_id: string;
  name: string;
  arguments: string;
  status: "in_progress" | "completed" | "incomplete";
  [extra: string]: unknown;
}

/** A `function_call_output` item: the client's result of a function call. */
export interface FunctionCallOutputItem {
  id: string;
  type: "function_call_output";
  call_id: string;
  output: string | ItemContentPart[];
  status: "in_progress" | "completed" | "incomplete";
  [extra: string]: unknown;
}

/**
 * An item of another type (`reasoning`, `web_search_call`, …): stored as it came and listed back,
 * never sent to a chat completions model, which has no way to read it.
 */
export interface OtherItem {
  id: string;
  type: string;
  [extra: string]: unknown;
}

/** Any item threadkeep keeps. Every item has an `id` and a `type`. */
export type Item = MessageItem | FunctionCallItem | FunctionCallOutputItem | OtherItem;

/**
 * How a stored chat message remembers the items it came from (`metadata.items`): one entry per
 * item, in order. An entry with `id` names an item the message itself spells (its fields are
 * derived from the chat message; `set` and `unset` hold what derivation does not give back), an
 * entry with `item` carries an item the chat message cannot hold (a reasoning item), kept whole.
 */
export type ItemEntry = { id: string; set?: Record<string, unknown>; unset?: string[] } | { item: Item };

/** The metadata key of {@link ItemEntry} lists on stored messages. */
export const ITEMS_KEY = "items";
