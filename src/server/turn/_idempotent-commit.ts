/**
 * Idempotency keys that hold across server processes (`--workers`, several instances): the key
 * becomes the commit's store `operationId`, and the stored reply carries it in its metadata, so a
 * retry that lands on another process finds the committed turn in the session (under the turn lease,
 * after the first attempt's commit) and answers from it instead of asking the model again.
 */
import { createHash } from "node:crypto";
import type { Memory } from "../../core/memory/memory.js";
import type { Message, MessageInput } from "../../core/types.js";

/** Where the operation id is kept on a turn's stored reply. */
export const OPERATION_METADATA_KEY = "idempotencyKey";

/** The store operation id of an `Idempotency-Key`: the same for the same user, scope and key on every process. */
export function operationIdOf(userId: string, scope: string, key: string): string {
  return `idem:${createHash("sha256").update(`${userId}\n${scope}\n${key}`).digest("base64url")}`;
}

/** The turn's messages to commit, the reply marked with the operation id. */
export function markCommitted(messages: MessageInput[], operationId: string | undefined): MessageInput[] {
  if (!operationId || messages.length === 0) return messages;
  const last = messages.at(-1)!;
  return [...messages.slice(0, -1), { ...last, metadata: { ...last.metadata, [OPERATION_METADATA_KEY]: operationId } }];
}

/** How far back a retry looks for its committed turn (the commit is recent: the retry waited behind it). */
const LOOK_BACK = 20;

/**
 * The reply an earlier attempt of this operation committed, as a chat completion, or null. Read
 * under the turn lease, so an attempt still running on another process has committed by now.
 */
export async function committedCompletion(
  memory: Memory,
  sessionId: string,
  userId: string,
  operationId: string,
): Promise<Record<string, unknown> | null> {
  let recent: Message[];
  try {
    recent = await memory.getMessages(sessionId, { userId, last: LOOK_BACK });
  } catch {
    // A new session (or one the store cannot read now) holds no earlier attempt to replay.
    return null;
  }
  const stored = recent.findLast((m) => m.metadata?.[OPERATION_METADATA_KEY] === operationId);
  if (!stored) return null;
  const message: Record<string, unknown> = { role: "assistant", content: stored.content ?? null };
  if (stored.tool_calls) message.tool_calls = stored.tool_calls;
  return {
    id: `chatcmpl-${operationId.slice(5, 29)}`,
    object: "chat.completion",
    created: Math.floor(stored.createdAt / 1000),
    model: stored.metadata?.model ?? "unknown",
    choices: [
      {
        index: 0,
        message,
        finish_reason: stored.metadata?.finishReason ?? (stored.tool_calls ? "tool_calls" : "stop"),
      },
    ],
  };
}
