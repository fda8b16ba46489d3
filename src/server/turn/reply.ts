/** The assistant message a turn stores from the upstream's reply. */
import type { MessageInput } from "../../core/types.js";

/** Fields of an upstream reply worth keeping; e.g. `reasoning_content` is left out, as some APIs refuse it back. */
const KEPT_FIELDS = ["name", "refusal", "function_call", "audio"] as const;

/** The assistant message to store from an upstream reply (null when it has none). */
export function replyMessage(
  message: unknown,
  extra: { model?: string; finishReason?: string | null } = {},
): MessageInput | null {
  if (!message || typeof message !== "object") return null;
  const source = message as Record<string, unknown>;
  const content = source.content;
  const stored: MessageInput = {
    role: "assistant",
    content: typeof content === "string" || Array.isArray(content) ? (content as MessageInput["content"]) : null,
  };
  if (Array.isArray(source.tool_calls) && source.tool_calls.length > 0)
    stored.tool_calls = source.tool_calls as MessageInput["tool_calls"];
  for (const field of KEPT_FIELDS) {
    if (source[field] !== undefined && source[field] !== null)
      (stored as Record<string, unknown>)[field] = source[field];
  }
  if (stored.content === null && !stored.tool_calls) stored.content = "";
  const metadata: Record<string, unknown> = {};
  if (extra.model) metadata.model = extra.model;
  if (extra.finishReason) metadata.finishReason = extra.finishReason;
  if (Object.keys(metadata).length > 0) stored.metadata = metadata;
  return stored;
}
