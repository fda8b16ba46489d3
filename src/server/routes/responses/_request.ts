/**
 * A Responses API request (`POST /v1/responses`), checked and translated to what a chat
 * completions upstream understands: input items → messages (in core), instructions → a system
 * message for this response only, function tools, tool_choice, text.format → response_format.
 * What a chat model cannot do (hosted tools, background runs, stored prompts) is a 400 that says so.
 */
import { z } from "zod";
import { ThreadkeepError } from "../../../core/errors.js";
import { type Item, normalizeInput, sessionOfConversation } from "../../../core/items/index.js";
import { parseBody } from "../_validate.js";
import { Metadata } from "../_item-pages.js";

/** The body of `POST /v1/responses`. */
export const ResponsesBody = z.looseObject({
  model: z.string().min(1).optional(),
  input: z.union([z.string(), z.array(z.unknown())]),
  instructions: z.string().nullish(),
  previous_response_id: z.string().min(1).nullish(),
  conversation: z.union([z.string().min(1), z.looseObject({ id: z.string().min(1) })]).nullish(),
  stream: z.boolean().nullish(),
  store: z.boolean().nullish().describe("default true"),
  tools: z
    .array(z.looseObject({ type: z.string() }))
    .nullish()
    .describe("Function tools only"),
  tool_choice: z.union([z.enum(["none", "auto", "required"]), z.looseObject({ type: z.string() })]).nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  max_output_tokens: z.number().int().min(1).nullish(),
  metadata: Metadata.nullish(),
  user: z.string().nullish(),
  text: z.looseObject({ format: z.looseObject({ type: z.string() }).optional() }).nullish(),
  reasoning: z.looseObject({ effort: z.string().nullish() }).nullish(),
  background: z.boolean().nullish(),
  prompt: z.unknown().optional(),
});

type Body = z.infer<typeof ResponsesBody>;

/** A checked Responses request. */
export interface ResponsesRequest {
  body: Body;
  items: Item[];
  model?: string;
  stream: boolean;
  /** @default true */
  store: boolean;
  previousResponseId?: string;
  /** The session of `conversation`, when given. */
  conversationSession?: string;
  /** The fields the `response` object echoes. */
  echo: ResponseEcho;
  /** Chat completions parameters besides model and messages. */
  chatParams: Record<string, unknown>;
}

/** Request fields a `response` object repeats, with OpenAI's defaults filled in. */
export interface ResponseEcho {
  instructions: string | null;
  metadata: Record<string, string>;
  tools: Record<string, unknown>[];
  tool_choice: unknown;
  parallel_tool_calls: boolean;
  temperature: number;
  top_p: number;
  max_output_tokens: number | null;
  text: Record<string, unknown>;
  user: string | null;
  store: boolean;
}

function unsupported(param: string, message: string): ThreadkeepError {
  return new ThreadkeepError("invalid_request", message, { details: { field: param } });
}

function chatTools(tools: Body["tools"]): Record<string, unknown>[] | undefined {
  if (!tools || tools.length === 0) return undefined;
  return tools.map((tool, i) => {
    if (tool.type !== "function") {
      throw unsupported(
        `tools[${i}].type`,
        `tools[${i}]: the hosted tool ${JSON.stringify(tool.type)} is not supported: threadkeep translates to chat completions, which run function tools only`,
      );
    }
    if (typeof tool.name !== "string" || tool.name.length === 0)
      throw unsupported(`tools[${i}].name`, `tools[${i}].name: required`);
    const fn: Record<string, unknown> = { name: tool.name };
    if (typeof tool.description === "string") fn.description = tool.description;
    if (tool.parameters != null) fn.parameters = tool.parameters;
    if (typeof tool.strict === "boolean") fn.strict = tool.strict;
    return { type: "function", function: fn };
  });
}

function chatToolChoice(choice: Body["tool_choice"]): unknown {
  if (choice == null || typeof choice === "string") return choice ?? undefined;
  if (choice.type === "function" && typeof choice.name === "string")
    return { type: "function", function: { name: choice.name } };
  if (choice.type === "allowed_tools" && (choice.mode === "auto" || choice.mode === "required")) return choice.mode;
  throw unsupported(
    "tool_choice",
    `tool_choice of type ${JSON.stringify(choice.type)} is not supported with chat completions upstreams`,
  );
}

function responseFormat(format: Record<string, unknown> | undefined): unknown {
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") return { type: "json_object" };
  if (format.type === "json_schema") {
    if (typeof format.name !== "string" || typeof format.schema !== "object" || format.schema === null) {
      throw unsupported("text.format", "text.format: a json_schema format needs a name and a schema");
    }
    const schema: Record<string, unknown> = { name: format.name, schema: format.schema };
    if (typeof format.description === "string") schema.description = format.description;
    if (typeof format.strict === "boolean") schema.strict = format.strict;
    return { type: "json_schema", json_schema: schema };
  }
  throw unsupported("text.format.type", `text.format.type ${JSON.stringify(format.type)} is not supported`);
}

/**
 * Checks a Responses request body.
 * @throws ThreadkeepError `invalid_request` naming the field.
 */
export function parseResponsesRequest(raw: unknown): ResponsesRequest {
  const body = parseBody(ResponsesBody, raw);
  if (body.background) throw unsupported("background", "background responses are not supported");
  if (body.prompt != null) throw unsupported("prompt", "stored prompts are not supported: send instructions and input");
  if (body.previous_response_id && body.conversation) {
    throw unsupported(
      "previous_response_id",
      "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or 'conversation'.",
    );
  }
  const items = normalizeInput(body.input);
  const tools = chatTools(body.tools);
  const chatParams: Record<string, unknown> = {};
  if (tools) chatParams.tools = tools;
  const toolChoice = chatToolChoice(body.tool_choice);
  if (toolChoice !== undefined && tools) chatParams.tool_choice = toolChoice;
  // Chat APIs refuse parallel_tool_calls without tools.
  if (body.parallel_tool_calls != null && tools) chatParams.parallel_tool_calls = body.parallel_tool_calls;
  if (body.temperature != null) chatParams.temperature = body.temperature;
  if (body.top_p != null) chatParams.top_p = body.top_p;
  if (body.max_output_tokens != null) chatParams.max_tokens = body.max_output_tokens;
  if (body.user) chatParams.user = body.user;
  if (body.reasoning?.effort) chatParams.reasoning_effort = body.reasoning.effort;
  const format = responseFormat(body.text?.format);
  if (format) chatParams.response_format = format;
  const conversation = typeof body.conversation === "string" ? body.conversation : body.conversation?.id;
  const store = body.store ?? true;
  return {
    body,
    items,
    model: body.model,
    stream: body.stream === true,
    store,
    previousResponseId: body.previous_response_id ?? undefined,
    conversationSession: conversation ? sessionOfConversation(conversation) : undefined,
    chatParams,
    echo: {
      instructions: body.instructions ?? null,
      metadata: body.metadata ?? {},
      tools: body.tools ?? [],
      tool_choice: body.tool_choice ?? "auto",
      parallel_tool_calls: body.parallel_tool_calls ?? true,
      temperature: body.temperature ?? 1,
      top_p: body.top_p ?? 1,
      max_output_tokens: body.max_output_tokens ?? null,
      text: { format: body.text?.format ?? { type: "text" }, verbosity: "medium" },
      user: body.user ?? null,
      store,
    },
  };
}
