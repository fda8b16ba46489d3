import { toChatMessage } from "../messages.js";
import type { AssembledContext, ContextInput } from "./types.js";

/**
 * Builds the messages of the next request: system messages, then the recent window, then the input.
 * First cut: window only, token budget and summaries come with the context engine.
 */
export function assembleContext(input: ContextInput): AssembledContext {
  const recent = input.history.slice(-input.window);
  // A window must not start with tool results whose call fell outside it.
  while (recent.length > 0 && recent[0].role === "tool") recent.shift();
  const messages = [...input.system, ...recent.map(toChatMessage), ...input.input];
  return {
    messages,
    tokens: 0,
    includedSeqs: recent.map((m) => m.seq),
    includedSummaryIds: [],
    omitted: { messages: input.history.length - recent.length, tokens: 0, summaries: input.summaries.length, truncated: 0 },
  };
}
