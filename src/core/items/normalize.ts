/**
 * Turns what a client sends as Responses `input` (or Conversations `items`) into complete items: a
 * string becomes a user message, an easy message gets its type, parts, status and an id, every
 * item is checked. Bad input is an `invalid_request` naming the field (`input[2].content[0].text`).
 */
import { ThreadkeepError } from "../errors.js";
import { randomHex } from "./random-hex.js";
import type { FunctionCallItem, FunctionCallOutputItem, Item, ItemContentPart, MessageItem } from "./types.js";

const MESSAGE_ROLES = ["user", "assistant", "system", "developer"] as const;
const STATUSES = ["in_progress", "completed", "incomplete"] as const;
/** Item types that cannot be kept at all: a reference to an item threadkeep would have to look up. */
const REFUSED_TYPES = new Set(["item_reference"]);

/** A new item id with the prefix OpenAI uses for the type (`msg_`, `fc_`, …) and 48 random hex digits. */
export function newItemId(type: string): string {
  const prefix =
    type === "message" ? "msg" : type === "function_call" ? "fc" : type === "function_call_output" ? "fco" : "item";
  return `${prefix}_${randomHex(24)}`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function invalid(param: string, message: string): ThreadkeepError {
  return new ThreadkeepError("invalid_request", `${param}: ${message}`, { details: { field: param } });
}

function text(value: unknown, param: string): string {
  if (typeof value !== "string") throw invalid(param, "must be a string");
  return value;
}

function inputPart(value: unknown, param: string, assistant: boolean): ItemContentPart {
  if (!isObject(value) || typeof value.type !== "string")
    throw invalid(param, "a content part must be an object with a string type");
  const part = value as ItemContentPart;
  switch (part.type) {
    case "input_text":
      text(part.text, `${param}.text`);
      // An assistant message's text is output text, whichever way the client spelled it.
      return assistant
        ? { type: "output_text", text: part.text as string, annotations: [] }
        : { ...part, type: "input_text" };
    case "output_text":
      text(part.text, `${param}.text`);
      return { ...part, annotations: Array.isArray(part.annotations) ? part.annotations : [] };
    case "refusal":
      text(part.refusal, `${param}.refusal`);
      return { ...part };
    case "input_image":
      if (typeof part.image_url !== "string" && typeof part.file_id !== "string") {
        throw invalid(param, "an input_image needs an image_url or a file_id");
      }
      return { ...part, detail: typeof part.detail === "string" ? part.detail : "auto" };
    case "input_file":
      return { ...part };
    default:
      throw invalid(`${param}.type`, `content part type ${JSON.stringify(part.type).slice(0, 60)} is not supported`);
  }
}

function status(value: unknown): (typeof STATUSES)[number] {
  return (STATUSES as readonly unknown[]).includes(value) ? (value as (typeof STATUSES)[number]) : "completed";
}

function idOf(value: Record<string, unknown>, type: string): string {
  return typeof value.id === "string" && value.id.length > 0 && value.id.length <= 200 ? value.id : newItemId(type);
}

function messageItem(value: Record<string, unknown>, param: string): MessageItem {
  const role = value.role;
  if (!(MESSAGE_ROLES as readonly unknown[]).includes(role)) {
    throw invalid(`${param}.role`, `must be one of ${MESSAGE_ROLES.join(", ")}`);
  }
  const assistant = role === "assistant";
  let content: ItemContentPart[];
  if (typeof value.content === "string") {
    content = [
      assistant
        ? { type: "output_text", text: value.content, annotations: [] }
        : { type: "input_text", text: value.content },
    ];
  } else if (Array.isArray(value.content)) {
    content = value.content.map((part, j) => inputPart(part, `${param}.content[${j}]`, assistant));
  } else {
    throw invalid(`${param}.content`, "must be a string or an array of content parts");
  }
  const { id: _id, type: _type, status: _status, role: _role, content: _content, ...rest } = value;
  return {
    ...rest,
    id: idOf(value, "message"),
    type: "message",
    role: role as MessageItem["role"],
    content,
    status: status(value.status),
  };
}

/** Checks and completes one input item. */
export function normalizeItem(value: unknown, param: string): Item {
  if (!isObject(value)) throw invalid(param, "an item must be an object");
  const type = value.type ?? "message";
  if (typeof type !== "string") throw invalid(`${param}.type`, "must be a string");
  if (type === "message") return messageItem(value, param);
  if (REFUSED_TYPES.has(type)) throw invalid(`${param}.type`, `${type} is not supported: send the item itself`);
  const id = idOf(value, type);
  if (type === "function_call") {
    const call: FunctionCallItem = {
      ...value,
      id,
      type,
      call_id: text(value.call_id, `${param}.call_id`),
      name: text(value.name, `${param}.name`),
      arguments: text(value.arguments, `${param}.arguments`),
      status: status(value.status),
    };
    return call;
  }
  if (type === "function_call_output") {
    const output = value.output;
    const parts = Array.isArray(output)
      ? output.map((part, j) => inputPart(part, `${param}.output[${j}]`, false))
      : undefined;
    const result: FunctionCallOutputItem = {
      ...value,
      id,
      type,
      call_id: text(value.call_id, `${param}.call_id`),
      output: parts ?? text(output, `${param}.output`),
      status: status(value.status),
    };
    return result;
  }
  return { ...value, id, type };
}

/**
 * The items of a Responses `input` (a string is one user message) or a Conversations `items` list.
 * @throws ThreadkeepError `invalid_request` naming the offending field.
 */
export function normalizeInput(input: unknown, param = "input"): Item[] {
  if (typeof input === "string") return [normalizeItem({ role: "user", content: input }, param)];
  if (!Array.isArray(input)) throw invalid(param, "must be a string or an array of items");
  return input.map((value, i) => normalizeItem(value, `${param}[${i}]`));
}
