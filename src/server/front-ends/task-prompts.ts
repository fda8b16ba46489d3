/**
 * The background tasks front-ends run on a chat's id, recognised by the structure of the prompts
 * they render from their default templates. Each prompt is one user message (after system messages
 * only: a task model may add its own system prompt) that embeds the chat as text.
 *
 * The strings come from:
 * - Open WebUI `backend/open_webui/config.py`: `DEFAULT_TITLE_GENERATION_PROMPT_TEMPLATE`,
 *   `DEFAULT_TAGS_GENERATION_PROMPT_TEMPLATE`, `DEFAULT_FOLLOW_UP_GENERATION_PROMPT_TEMPLATE`,
 *   `DEFAULT_QUERY_GENERATION_PROMPT_TEMPLATE`, `DEFAULT_IMAGE_PROMPT_GENERATION_PROMPT_TEMPLATE`,
 *   `DEFAULT_AUTOCOMPLETE_GENERATION_PROMPT_TEMPLATE` (each `### Task:` … `### Output:` with a JSON
 *   key … `<chat_history>\n{{MESSAGES:END:n}}\n</chat_history>`), `DEFAULT_EMOJI_GENERATION_PROMPT_TEMPLATE`
 *   and `DEFAULT_TOOLS_FUNCTION_CALLING_PROMPT_TEMPLATE` (the system message of
 *   `utils/middleware.py` `get_tools_function_calling_payload`);
 * - LibreChat's title (`@librechat/agents` `src/utils/title.ts` `defaultCompletionPrompt` and
 *   `defaultTitlePrompt`, the chat rendered by `src/run.ts` as `User: {input}\nAI: {output}`).
 */

/** What a side request is for. */
export type SideRequestKind =
  | "title"
  | "tags"
  | "follow_ups"
  | "queries"
  | "autocomplete"
  | "emoji"
  | "image_prompt"
  | "function_calling"
  | "moa"
  | "other";

/** The JSON key each Open WebUI `### Task:` template asks for, by kind. */
const OPEN_WEBUI_OUTPUT_KEYS: Readonly<Record<string, SideRequestKind>> = {
  title: "title",
  tags: "tags",
  follow_ups: "follow_ups",
  queries: "queries",
  prompt: "image_prompt",
  text: "autocomplete",
};

/** `DEFAULT_EMOJI_GENERATION_PROMPT_TEMPLATE`, up to its `Message: ```{{prompt}}```` line. */
const OPEN_WEBUI_EMOJI =
  "Your task is to reflect the speaker's likely facial expression through a fitting emoji. Interpret emotions from the message and reflect their facial expression using fitting, diverse emojis (e.g., 😊, 😢, 😡, 😱).";

/** `DEFAULT_TOOLS_FUNCTION_CALLING_PROMPT_TEMPLATE`: its opening and its instruction sentence. */
const OPEN_WEBUI_TOOLS_OPENING = "Available Tools: ";
const OPEN_WEBUI_TOOLS_TASK =
  "Your task is to choose and return the correct tool(s) from the list of available tools based on the query.";

/** LibreChat's `defaultCompletionPrompt` (title method `completion`, the default), before `{convo}`. */
const LIBRECHAT_COMPLETION_TITLE =
  "Provide a concise, 5-word-or-less title for the conversation, using title case conventions. Only return the title itself.\n\nConversation:\n";
/** LibreChat's `defaultTitlePrompt` (title method `structured`), before `{convo}`. */
const LIBRECHAT_STRUCTURED_TITLE =
  "Analyze this conversation and provide:\n1. The detected language of the conversation\n2. A concise title in the detected language (5 words or less, no punctuation or quotation)\n\n";

type Message = { role?: unknown; content?: unknown };

function roleOf(message: unknown): unknown {
  return (message as Message | null)?.role;
}

/** The text of a message: its string content, or its text parts joined. */
function textOf(message: unknown): string | undefined {
  const content = (message as Message | null)?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return undefined;
  const parts = content.filter((p) => p && typeof p === "object" && p.type === "text" && typeof p.text === "string");
  return parts.length === content.length ? parts.map((p) => p.text).join("") : undefined;
}

/** An Open WebUI task rendered from one of its default templates. */
function openWebUiTask(text: string): SideRequestKind | undefined {
  if (text.startsWith(OPEN_WEBUI_EMOJI) && /\n\nMessage: ```[\s\S]*```$/.test(text)) return "emoji";
  if (!text.startsWith("### Task:\n")) return undefined;
  const history = text.indexOf("\n<chat_history>\n");
  if (history < 0) return undefined;
  const instructions = text.slice(0, history);
  // `### Output:` (title, tags, follow-ups, queries, image prompt) or `### **Output Rules**:` (autocomplete).
  if (!/\n#{3,4} [^\n]*Output[^\n]*:\s*\n/.test(instructions)) return undefined;
  const key = /\{\s*"([a-z_]+)"\s*:/.exec(instructions)?.[1];
  const kind = key === undefined ? undefined : OPEN_WEBUI_OUTPUT_KEYS[key];
  if (!kind) return undefined;
  const rest = text.slice(history + 1);
  const closed =
    kind === "autocomplete"
      ? /<\/chat_history>\n<type>[^\n]*<\/type>[ \t]*\n<text>[\s\S]*<\/text>[ \t]*\n#### Output:\s*$/.test(rest)
      : /<\/chat_history>\s*$/.test(rest);
  return closed ? kind : undefined;
}

/** Open WebUI's tool selection: the tools template as system message, then `Query: …` / `History: …`. */
function openWebUiToolSelection(system: string[], text: string): boolean {
  const tools = system.some(
    (s) =>
      (s.startsWith(OPEN_WEBUI_TOOLS_OPENING) || s.includes(`\n${OPEN_WEBUI_TOOLS_OPENING}`)) &&
      s.includes(OPEN_WEBUI_TOOLS_TASK),
  );
  return tools && (text.startsWith("Query: ") || text.startsWith("History:\n"));
}

/** LibreChat's title request: its prompt, then the chat as `User: …\nAI: …`. */
function libreChatTitle(text: string): boolean {
  for (const prompt of [LIBRECHAT_COMPLETION_TITLE, LIBRECHAT_STRUCTURED_TITLE]) {
    if (text.startsWith(prompt) && text.slice(prompt.length).startsWith("User: ")) return true;
  }
  return false;
}

/**
 * The front-end task a chat request carries, recognised from the structure of its prompt (not from
 * a word in it), or undefined for a turn. Only a request of one user message after system messages
 * can be a task: a real turn of a chat that merely mentions a template's words stays a turn.
 */
export function taskOfPrompt(messages: readonly unknown[]): SideRequestKind | undefined {
  const last = messages.at(-1);
  if (roleOf(last) !== "user") return undefined;
  const before = messages.slice(0, -1);
  if (!before.every((m) => roleOf(m) === "system" || roleOf(m) === "developer")) return undefined;
  const text = textOf(last);
  if (text === undefined) return undefined;
  const system = before.map(textOf).filter((s): s is string => s !== undefined);
  if (openWebUiToolSelection(system, text)) return "function_calling";
  return openWebUiTask(text) ?? (libreChatTitle(text) ? "title" : undefined);
}
