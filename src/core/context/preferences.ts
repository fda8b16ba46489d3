import { z } from "zod";
import { isThreadkeepError } from "../errors.js";
import { parseWith } from "../validate.js";
import type { ChatMessage, ToolCall } from "../types.js";
import type { ContextPreferences } from "./types.js";

/** Widest focus range, in messages. */
export const MAX_FOCUS_MESSAGES = 200;

const seq = z.int().min(1);

/** The JSON shape of {@link ContextPreferences} (stored in session state under `data.preferences`). */
export const contextPreferencesSchema = z.strictObject({
  maxRecentMessages: z.int().min(1).max(1000).optional(),
  focusRange: z
    .strictObject({ fromSeq: seq, toSeq: seq })
    .refine((r) => r.toSeq >= r.fromSeq, { message: "must not be below fromSeq", path: ["toSeq"] })
    .refine((r) => r.toSeq - r.fromSeq < MAX_FOCUS_MESSAGES, {
      message: `spans at most ${MAX_FOCUS_MESSAGES} messages`,
      path: ["toSeq"],
    })
    .optional(),
  includeSummaries: z.boolean().optional(),
  pinnedSeqs: z.array(seq).max(50).optional(),
  sticky: z.boolean().optional(),
  recallTopic: z.string().trim().min(1).max(500).optional(),
  recallScope: z.enum(["session", "user"]).optional(),
  memories: z.boolean().optional(),
  memoryIds: z.array(z.string().min(1).max(200)).max(50).optional(),
});

/** Validates preferences. @throws ThreadkeepError `invalid_request` naming the field (`preferences.focusRange.toSeq`). */
export function parseContextPreferences(value: unknown): ContextPreferences {
  return parseWith(contextPreferencesSchema, value, "preferences");
}

/** The stored preferences in session state data; none when missing or unreadable. */
export function readPreferences(data: Record<string, unknown> | undefined): ContextPreferences | undefined {
  if (data?.preferences === undefined) return undefined;
  const parsed = contextPreferencesSchema.safeParse(data.preferences);
  return parsed.success ? parsed.data : undefined;
}

/** The name of the preferences tool. */
export const SET_CONTEXT_PREFERENCES = "set_context_preferences";

const seqRange = { type: "integer", minimum: 1 };

/**
 * The `set_context_preferences` tool as an OpenAI chat `tools` entry: hand it to a model so it can
 * ask for more (or different) history on its next turn.
 */
export const setContextPreferencesTool = {
  type: "function",
  function: {
    name: SET_CONTEXT_PREFERENCES,
    description:
      "Change which parts of this conversation you see on your next turn: more recent messages, an older range of " +
      "messages by seq (for example one found by search), pinned messages, or no summaries. Applies to the next turn " +
      "only, unless sticky is true. Fields you leave out keep their current value.",
    parameters: {
      type: "object",
      properties: {
        maxRecentMessages: {
          type: "integer",
          minimum: 1,
          maximum: 1000,
          description: "How many recent messages to include.",
        },
        focusRange: {
          type: "object",
          description: `An older range of messages to bring back, inclusive, at most ${MAX_FOCUS_MESSAGES} messages.`,
          properties: { fromSeq: seqRange, toSeq: seqRange },
          required: ["fromSeq", "toSeq"],
          additionalProperties: false,
        },
        includeSummaries: { type: "boolean", description: "Whether to include summaries of older turns." },
        pinnedSeqs: {
          type: "array",
          items: seqRange,
          maxItems: 50,
          description: "Messages (by seq) to always include.",
        },
        sticky: { type: "boolean", description: "Keep these preferences for later turns too." },
        recallTopic: {
          type: "string",
          maxLength: 500,
          description: "Bring back the older messages of this conversation most related to this topic.",
        },
        recallScope: {
          type: "string",
          enum: ["session", "user"],
          description:
            "Where recall looks: this conversation only (session), or also the user's other conversations (user).",
        },
        memories: { type: "boolean", description: "Whether to include what you know about the user (memories)." },
        memoryIds: {
          type: "array",
          items: { type: "string" },
          maxItems: 50,
          description: "Memories (by id) to always include.",
        },
        reset: { type: "boolean", description: "Forget earlier preferences before applying these." },
      },
      additionalProperties: false,
    },
  },
} as const;

/** Where the tool handler stores preferences: a {@link Memory} or anything with the same method. */
export interface PreferencesTarget {
  setPreferences(
    sessionId: string,
    preferences: ContextPreferences,
    options?: { userId?: string; merge?: boolean },
  ): Promise<ContextPreferences | undefined>;
}

/**
 * Applies a `set_context_preferences` call of a model and returns the tool message to send back.
 * Invalid arguments do not throw: the tool message says what was wrong, so the model can retry.
 * Other failures (store errors, unknown session) are thrown.
 */
export async function handleSetContextPreferences(
  target: PreferencesTarget,
  sessionId: string,
  call: Pick<ToolCall, "id" | "function">,
  options: { userId?: string } = {},
): Promise<ChatMessage> {
  const reply = (body: unknown): ChatMessage => ({
    role: "tool",
    tool_call_id: call.id,
    content: JSON.stringify(body),
  });
  let args: unknown;
  try {
    args = call.function.arguments.trim() === "" ? {} : JSON.parse(call.function.arguments);
  } catch {
    return reply({ ok: false, error: "arguments are not valid JSON" });
  }
  try {
    const { reset, ...rest } = (typeof args === "object" && args !== null ? args : { args }) as Record<string, unknown>;
    if (reset !== undefined && typeof reset !== "boolean")
      return reply({ ok: false, error: "reset: must be a boolean" });
    const preferences = parseContextPreferences(rest);
    const stored = await target.setPreferences(sessionId, preferences, {
      userId: options.userId,
      merge: !reset,
    });
    return reply({ ok: true, preferences: stored ?? {} });
  } catch (error) {
    if (isThreadkeepError(error, "invalid_request")) return reply({ ok: false, error: error.message });
    throw error;
  }
}
