/**
 * The Responses event stream, converted from the upstream's chat completion chunks as they arrive:
 * `response.created`, `response.in_progress`, then per output item `response.output_item.added`,
 * text (`response.content_part.added`, `response.output_text.delta` … `.done`) or function call
 * arguments (`response.function_call_arguments.delta` … `.done`), `response.output_item.done`, and
 * `response.completed` once the turn is stored (`error` + `response.failed` when the upstream
 * broke off). Every event carries its `sequence_number`.
 */
import { type Item, newItemId } from "../../../core/items/index.js";
import type { MessageInput } from "../../../core/types.js";
import type { StreamAccumulator, StreamEvent } from "../../../llm/openai-compatible.js";
import { outputMessages, type ResponseMeta, responseObject, type ResponseUsage, statusOf, usageOf } from "./_object.js";
import { type StreamDialect, type StreamEnd, saveWarningLine } from "../../turn/stream.js";

interface OpenText {
  kind: "text";
  id: string;
  index: number;
  text: string;
  done: boolean;
}

interface OpenCall {
  kind: "call";
  id: string;
  index: number;
  call_id: string;
  name: string;
  arguments: string;
  done: boolean;
}

/** The stream framing of one Responses turn. */
export class ResponsesStream implements StreamDialect {
  readonly #meta: ResponseMeta;
  readonly #inputCount: number;
  #sequence = 0;
  #items: (OpenText | OpenCall)[] = [];
  #text?: OpenText;
  #calls = new Map<number, OpenCall>();
  #usage: ResponseUsage | null = null;
  #final?: { status: string; output: Item[]; incomplete_details: unknown; completed_at: number | null };

  constructor(meta: ResponseMeta, inputCount: number) {
    this.#meta = meta;
    this.#inputCount = inputCount;
  }

  #frame(type: string, fields: Record<string, unknown>): string {
    const event = { type, sequence_number: this.#sequence++, ...fields };
    return `event: ${type}\ndata: ${JSON.stringify(event)}\n\n`;
  }

  open(): string {
    const response = responseObject(this.#meta, { status: "in_progress", output: [], usage: null });
    return this.#frame("response.created", { response }) + this.#frame("response.in_progress", { response });
  }

  event(event: StreamEvent, _accumulator: StreamAccumulator): string {
    const chunk = event.chunk;
    if (!chunk) return "";
    if (chunk.usage) this.#usage = usageOf(chunk.usage);
    const delta = chunk.choices?.[0]?.delta;
    if (!delta) return "";
    let out = "";
    if (typeof delta.content === "string" && delta.content.length > 0) {
      if (!this.#text) {
        const id = newItemId("message");
        this.#text = { kind: "text", id, index: this.#items.length, text: "", done: false };
        this.#items.push(this.#text);
        out += this.#frame("response.output_item.added", {
          output_index: this.#text.index,
          item: { id, type: "message", status: "in_progress", content: [], role: "assistant" },
        });
        out += this.#frame("response.content_part.added", {
          item_id: id,
          output_index: this.#text.index,
          content_index: 0,
          part: { type: "output_text", annotations: [], text: "" },
        });
      }
      this.#text.text += delta.content;
      out += this.#frame("response.output_text.delta", {
        item_id: this.#text.id,
        output_index: this.#text.index,
        content_index: 0,
        delta: delta.content,
        logprobs: [],
      });
    }
    for (const part of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
      const key = typeof part.index === "number" ? part.index : this.#calls.size;
      let call = this.#calls.get(key);
      if (!call) {
        // Text that came before the first call is finished: the call is the next output item.
        if (this.#text && !this.#text.done) out += this.#closeText("completed");
        call = {
          kind: "call",
          id: newItemId("function_call"),
          index: this.#items.length,
          call_id: "",
          name: "",
          arguments: "",
          done: false,
        };
        this.#calls.set(key, call);
        this.#items.push(call);
        if (part.id) call.call_id = part.id;
        if (part.function?.name) call.name += part.function.name;
        out += this.#frame("response.output_item.added", {
          output_index: call.index,
          item: {
            id: call.id,
            type: "function_call",
            status: "in_progress",
            arguments: "",
            call_id: call.call_id,
            name: call.name,
          },
        });
      } else {
        if (part.id) call.call_id = part.id;
        if (part.function?.name) call.name += part.function.name;
      }
      const args = part.function?.arguments;
      if (typeof args === "string" && args.length > 0) {
        call.arguments += args;
        out += this.#frame("response.function_call_arguments.delta", {
          item_id: call.id,
          output_index: call.index,
          delta: args,
        });
      }
    }
    return out;
  }

  #textItem(text: OpenText, status: "completed" | "incomplete"): Item {
    return {
      id: text.id,
      type: "message",
      role: "assistant",
      status,
      content: [{ type: "output_text", text: text.text, annotations: [] }],
    };
  }

  #callItem(call: OpenCall): Item {
    return {
      id: call.id,
      type: "function_call",
      status: "completed",
      arguments: call.arguments,
      call_id: call.call_id,
      name: call.name,
    };
  }

  #closeText(status: "completed" | "incomplete"): string {
    const text = this.#text as OpenText;
    text.done = true;
    const part = { type: "output_text", annotations: [], text: text.text };
    return (
      this.#frame("response.output_text.done", {
        item_id: text.id,
        output_index: text.index,
        content_index: 0,
        text: text.text,
        logprobs: [],
      }) +
      this.#frame("response.content_part.done", {
        item_id: text.id,
        output_index: text.index,
        content_index: 0,
        part,
      }) +
      this.#frame("response.output_item.done", { output_index: text.index, item: this.#textItem(text, status) })
    );
  }

  reply(accumulator: StreamAccumulator, incomplete: boolean): MessageInput[] {
    const finish = statusOf(incomplete ? "length" : accumulator.finishReason);
    const status = incomplete ? "incomplete" : finish.status;
    if (!this.#meta.model && accumulator.model) this.#meta.model = accumulator.model;
    // Half-streamed calls are dropped when the stream broke off: their arguments are cut.
    const items = this.#items.filter((item) => item.kind === "text" || !incomplete);
    if (items.length === 0) {
      const text: OpenText = { kind: "text", id: newItemId("message"), index: 0, text: "", done: false };
      this.#text = text;
      this.#items = [text];
      items.push(text);
    }
    const textStatus = status === "completed" ? "completed" : "incomplete";
    const output = items.map((item) =>
      item.kind === "text" ? this.#textItem(item, textStatus) : this.#callItem(item),
    );
    const completedAt = status === "completed" ? Math.floor(Date.now() / 1000) : null;
    this.#final = {
      status,
      output,
      incomplete_details: incomplete ? null : finish.incomplete_details,
      completed_at: completedAt,
    };
    if (!this.#meta.echo.store) return [];
    return outputMessages(this.#meta, output, this.#inputCount, {
      status,
      usage: this.#usage,
      incomplete_details: this.#final.incomplete_details,
      completed_at: completedAt,
      finishReason: accumulator.finishReason,
    });
  }

  close(end: StreamEnd): string {
    const final = this.#final;
    if (!final) return "";
    let out = "";
    if (end.failure !== undefined) {
      const message = `The upstream stream failed: ${(end.failure as Error)?.message ?? end.failure}`;
      out += this.#frame("error", { code: "server_error", message, param: null });
      const response = responseObject(this.#meta, {
        ...final,
        status: "failed",
        error: { code: "server_error", message },
        usage: this.#usage,
      });
      return out + this.#frame("response.failed", { response });
    }
    for (const item of this.#items) {
      if (item.done) continue;
      if (item.kind === "text") {
        out += this.#closeText(final.status === "completed" ? "completed" : "incomplete");
        continue;
      }
      item.done = true;
      out += this.#frame("response.function_call_arguments.done", {
        item_id: item.id,
        output_index: item.index,
        name: item.name,
        arguments: item.arguments,
      });
      out += this.#frame("response.output_item.done", { output_index: item.index, item: this.#callItem(item) });
    }
    out += saveWarningLine(end);
    const response = responseObject(this.#meta, { ...final, usage: this.#usage });
    return out + this.#frame(final.status === "completed" ? "response.completed" : "response.incomplete", { response });
  }
}
