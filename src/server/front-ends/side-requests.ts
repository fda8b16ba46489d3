/**
 * Side requests: a front-end's background tasks on a chat's id (a title, tags, follow-up
 * questions, search queries, …). They are answered by the upstream exactly as sent and forgotten:
 * never stored, never queued behind the chat's turn. A request is one when its prompt is a known
 * task template ({@link taskOfPrompt}) or when it names its task in `X-Threadkeep-Task`.
 */
import { filledHeader } from "./session-headers.js";
import { type SideRequestKind, taskOfPrompt } from "./task-prompts.js";

export type { SideRequestKind } from "./task-prompts.js";

/**
 * The header a front-end names a request's task in. Open WebUI fills it from a connection's custom
 * header `X-Threadkeep-Task: {{TASK}}` (`utils/headers.py` `parse_custom_headers`: `{{TASK}}` is the
 * request's `metadata.task`, e.g. `title_generation`, and empty on a chat turn).
 */
export const TASK_HEADER = "x-threadkeep-task";

/** Task names as Open WebUI's `constants.py` `TASKS` spells them, and the kinds' own names. */
const TASK_NAMES: Readonly<Record<string, SideRequestKind>> = {
  title_generation: "title",
  tags_generation: "tags",
  follow_up_generation: "follow_ups",
  query_generation: "queries",
  autocomplete_generation: "autocomplete",
  emoji_generation: "emoji",
  image_prompt_generation: "image_prompt",
  function_calling: "function_calling",
  moa_response_generation: "moa",
  title: "title",
  tags: "tags",
  follow_ups: "follow_ups",
  queries: "queries",
  autocomplete: "autocomplete",
  emoji: "emoji",
  image_prompt: "image_prompt",
  moa: "moa",
};

/**
 * The task named in `X-Threadkeep-Task`: a known name's kind, `other` for any other name, undefined
 * when the header is absent, empty (a chat turn) or an unresolved template.
 */
export function taskOfHeader(value: string | string[] | undefined): SideRequestKind | undefined {
  const name = filledHeader(value)?.toLowerCase();
  if (name === undefined) return undefined;
  return TASK_NAMES[name] ?? "other";
}

/** The side request a chat request is, or undefined for a turn. */
export function sideRequestOf(
  messages: readonly unknown[],
  headers: Record<string, string | string[] | undefined>,
): SideRequestKind | undefined {
  return taskOfHeader(headers[TASK_HEADER]) ?? taskOfPrompt(messages);
}
