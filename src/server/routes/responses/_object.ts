/**
 * The `response` object of the Responses API: built from the upstream's chat reply when a turn
 * completes, and again from what was stored when a client fetches it later.
 */
import {
  conversationIdOf,
  type Item,
  itemsToMessages,
  newItemId,
  RESPONSE_KEY,
  type StoredResponse,
} from "../../../core/items/index.js";
import type { MessageInput } from "../../../core/types.js";
import type { CompletionMessage, CompletionToolCall, CompletionUsage } from "../../../llm/openai-compatible.js";
import type { ResponseEcho } from "./_request.js";

/** The usage block of a response. */
export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** A chat completion's usage as Responses usage (zeros when the upstream reported none). */
export function usageOf(usage: CompletionUsage | null | undefined): ResponseUsage {
  const input = Number(usage?.prompt_tokens) || 0;
  const output = Number(usage?.completion_tokens) || 0;
  return {
    input_tokens: input,
    input_tokens_details: {
      cached_tokens: Number(usage?.prompt_tokens_details?.cached_tokens) || 0,
      cache_write_tokens: 0,
    },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: Number(usage?.completion_tokens_details?.reasoning_tokens) || 0 },
    total_tokens: Number(usage?.total_tokens) || input + output,
  };
}

/** Everything about one response besides its items. */
export interface ResponseMeta {
  id: string;
  sessionId: string;
  created_at: number;
  model: string;
  previous_response_id: string | null;
  /** The response belongs to a conversation (`conversation` was given). */
  conversation: boolean;
  echo: ResponseEcho;
}

/** `completed`, or `incomplete` (with why) from a chat finish reason. */
export function statusOf(finishReason: string | null | undefined): {
  status: string;
  incomplete_details: { reason: string } | null;
} {
  if (finishReason === "length") return { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } };
  if (finishReason === "content_filter")
    return { status: "incomplete", incomplete_details: { reason: "content_filter" } };
  return { status: "completed", incomplete_details: null };
}

/** The output items of a complete chat reply message. */
export function outputItems(
  message: CompletionMessage | undefined,
  status: "completed" | "incomplete" = "completed",
): Item[] {
  const items: Item[] = [];
  const text = typeof message?.content === "string" ? message.content : "";
  const calls: CompletionToolCall[] = Array.isArray(message?.tool_calls) ? message.tool_calls : [];
  const refusal = typeof message?.refusal === "string" ? message.refusal : undefined;
  if (text || refusal || calls.length === 0) {
    const content: Item["content"] = [];
    if (text || !refusal) (content as unknown[]).push({ type: "output_text", text, annotations: [] });
    if (refusal) (content as unknown[]).push({ type: "refusal", refusal });
    items.push({ id: newItemId("message"), type: "message", role: "assistant", status, content } as Item);
  }
  for (const call of calls) {
    items.push({
      id: newItemId("function_call"),
      type: "function_call",
      status: "completed",
      arguments: String(call?.function?.arguments ?? ""),
      call_id: String(call?.id ?? ""),
      name: String(call?.function?.name ?? ""),
    });
  }
  return items;
}

/** The `response` object. */
export function responseObject(
  meta: ResponseMeta,
  state: {
    status: string;
    output: Item[];
    usage: ResponseUsage | null;
    incomplete_details?: unknown;
    error?: unknown;
    completed_at?: number | null;
  },
): Record<string, unknown> {
  const { echo } = meta;
  return {
    id: meta.id,
    object: "response",
    created_at: meta.created_at,
    status: state.status,
    background: false,
    completed_at: state.completed_at ?? null,
    conversation: meta.conversation ? { id: conversationIdOf(meta.sessionId) } : null,
    error: state.error ?? null,
    incomplete_details: state.incomplete_details ?? null,
    instructions: echo.instructions,
    max_output_tokens: echo.max_output_tokens,
    metadata: echo.metadata,
    model: meta.model,
    output: state.output,
    parallel_tool_calls: echo.parallel_tool_calls,
    previous_response_id: meta.previous_response_id,
    reasoning: { effort: null, summary: null },
    service_tier: "default",
    store: echo.store,
    temperature: echo.temperature,
    text: echo.text,
    tool_choice: echo.tool_choice,
    tools: echo.tools,
    top_p: echo.top_p,
    truncation: "disabled",
    usage: state.usage,
    user: echo.user,
  };
}

/**
 * The messages that store a response's output, the last one carrying the response record (what
 * `GET /v1/responses/{id}` needs to rebuild the object).
 */
export function outputMessages(
  meta: ResponseMeta,
  output: Item[],
  inputCount: number,
  state: {
    status: string;
    usage: ResponseUsage | null;
    incomplete_details?: unknown;
    completed_at: number | null;
    finishReason?: string | null;
  },
): MessageInput[] {
  const messages = itemsToMessages(output);
  const record: StoredResponse = {
    id: meta.id,
    inputCount,
    outputCount: messages.length,
    created_at: meta.created_at,
    completed_at: state.completed_at,
    status: state.status,
    model: meta.model,
    previous_response_id: meta.previous_response_id,
    conversation: meta.conversation,
    usage: state.usage,
    incomplete_details: state.incomplete_details ?? null,
    echo: meta.echo,
  };
  const last = messages[messages.length - 1];
  last.metadata = {
    ...last.metadata,
    model: meta.model,
    ...(state.finishReason ? { finishReason: state.finishReason } : {}),
    [RESPONSE_KEY]: record,
  };
  return messages;
}

/** The response object of a stored response. */
export function storedResponseObject(
  record: StoredResponse,
  sessionId: string,
  output: Item[],
): Record<string, unknown> {
  const meta: ResponseMeta = {
    id: record.id,
    sessionId,
    created_at: record.created_at as number,
    model: record.model as string,
    previous_response_id: (record.previous_response_id as string | null) ?? null,
    conversation: record.conversation === true,
    echo: record.echo as ResponseEcho,
  };
  return responseObject(meta, {
    status: record.status as string,
    output,
    usage: (record.usage as ResponseUsage | null) ?? null,
    incomplete_details: record.incomplete_details,
    completed_at: record.completed_at as number | null,
  });
}
