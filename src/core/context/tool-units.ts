import type { ChatMessage, Message } from "../types.js";

/**
 * Messages that enter or leave a context together: a plain message alone, or the assistant message(s)
 * with tool calls and the tool results that answer them. Consecutive assistant messages that carry
 * only tool calls (parallel calls as the OpenAI Agents SDK stores them, one call each) are one unit.
 */
export interface ToolUnit {
  messages: Message[];
  /** Sendable as is: not a stray tool result, and every tool call answered. */
  valid: boolean;
  /** Tool call ids of the assistant message still unanswered (empty for complete units). */
  pending: Set<string>;
}

function isToolCaller(message: ChatMessage): boolean {
  return message.role === "assistant" && Array.isArray(message.tool_calls) && message.tool_calls.length > 0;
}

const isEmpty = (content: ChatMessage["content"]) =>
  content === null || content === "" || (Array.isArray(content) && content.length === 0);

/** A tool-call-only assistant message that joins the calls of `open`, whose results have not begun. */
function joinsCalls(open: ToolUnit | null, message: ChatMessage): boolean {
  return (
    open !== null &&
    isToolCaller(message) &&
    isEmpty(message.content) &&
    open.messages.every((m) => m.role === "assistant")
  );
}

/**
 * Splits history (oldest first) into units. A tool result joins the call it answers only when no
 * other message and no gap in seq lies between them, the order the chat API requires.
 */
export function groupToolUnits(history: readonly Message[]): ToolUnit[] {
  const units: ToolUnit[] = [];
  let open: ToolUnit | null = null;
  let previousSeq = Number.NaN;
  const close = () => {
    if (open) open.valid = open.pending.size === 0;
    open = null;
  };
  for (const message of history) {
    if (message.seq !== previousSeq + 1) close();
    previousSeq = message.seq;
    if (message.role === "tool") {
      const id = message.tool_call_id ?? "";
      const answers = open as ToolUnit | null;
      if (answers?.pending.has(id)) {
        answers.messages.push(message);
        answers.pending.delete(id);
      } else {
        // A stray result is left out on its own; an open call may still receive its real results.
        units.push({ messages: [message], valid: false, pending: new Set() });
      }
      continue;
    }
    if (joinsCalls(open, message)) {
      const unit = open as unknown as ToolUnit;
      unit.messages.push(message);
      for (const call of message.tool_calls!) unit.pending.add(call.id);
      continue;
    }
    close();
    if (isToolCaller(message)) {
      const unit: ToolUnit = {
        messages: [message],
        valid: false,
        pending: new Set(message.tool_calls!.map((c) => c.id)),
      };
      units.push(unit);
      open = unit;
    } else {
      units.push({ messages: [message], valid: true, pending: new Set() });
    }
  }
  close();
  return units;
}

/**
 * The input messages that may be sent: tool results must answer a call made earlier in the input or
 * by `carried` (the stored assistant message whose results arrive with this input).
 */
export function validInput(
  input: readonly ChatMessage[],
  carried?: ToolUnit,
): { kept: ChatMessage[]; dropped: number } {
  const known = new Set<string>();
  for (const message of carried?.messages ?? []) for (const call of message.tool_calls ?? []) known.add(call.id);
  const kept: ChatMessage[] = [];
  for (const message of input) {
    if (isToolCaller(message)) for (const call of message.tool_calls!) known.add(call.id);
    if (message.role === "tool" && !known.has(message.tool_call_id ?? "")) continue;
    kept.push(message);
  }
  return { kept, dropped: input.length - kept.length };
}

/** The last unit when its missing results are all in `input`, so it must travel with the input. */
export function unitCompletedByInput(units: readonly ToolUnit[], input: readonly ChatMessage[]): ToolUnit | undefined {
  const last = units.at(-1);
  if (!last || last.valid || last.pending.size === 0 || last.messages[0].role !== "assistant") return undefined;
  const answered = new Set(input.filter((m) => m.role === "tool").map((m) => m.tool_call_id));
  for (const id of last.pending) if (!answered.has(id)) return undefined;
  return last;
}

/**
 * A unit as the chat API takes it: assistant messages of one unit become one message with all their
 * calls (the API wants every call answered before the next assistant message); others as they are.
 */
export function sendable(unit: ToolUnit, convert: (m: Message) => ChatMessage): ChatMessage[] {
  const callers = unit.messages.filter((m) => m.role === "assistant");
  if (callers.length < 2) return unit.messages.map(convert);
  const [first, ...rest] = callers.map(convert);
  const merged: ChatMessage = { ...first, tool_calls: [first, ...rest].flatMap((m) => m.tool_calls ?? []) };
  return [merged, ...unit.messages.filter((m) => m.role !== "assistant").map(convert)];
}
