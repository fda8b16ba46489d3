/**
 * Open WebUI's retrieval (file and web-search) turns: the person's message is rewritten with
 * `DEFAULT_RAG_TEMPLATE` (`backend/open_webui/config.py`) before it is sent, so the stored copy of
 * that message differs from what the next request carries for it (Open WebUI keeps the person's own
 * words in its chat). {@link ragQueryOf} recovers those words from the rewritten message.
 *
 * How the rewrite is laid out (`utils/middleware.py` `apply_source_context_to_messages`, `utils/task.py`
 * `rag_template`, `utils/misc.py` `add_or_update_user_message`):
 * - current releases put the rendered template before the message, `append=False`:
 *   `### Task:\nRespond to the user query using the provided context…<context>\n…\n</context>\n` + `\n` + words;
 * - older ones appended it after the message: words + `\n` + template;
 * - a template with a query placeholder also holds the words in `<user_query>\n…\n</user_query>`.
 */

/** The opening of every `DEFAULT_RAG_TEMPLATE` that begins with `### Task:`. */
export const RAG_TEMPLATE_OPENING = "### Task:\nRespond to the user query using the provided context";

const CONTEXT_END = "</context>\n";
/** How the context block ends when it holds sources (`<source id="1" …>…</source>`), as Open WebUI renders them. */
const SOURCES_END = "</source>\n</context>\n";

/** Where the template's context block ends: after its last source, else at the last `</context>`. */
function contextEndOf(template: string): number {
  const sources = template.indexOf(SOURCES_END);
  if (sources >= 0) return sources + SOURCES_END.length;
  const end = template.lastIndexOf(CONTEXT_END);
  return end < 0 ? -1 : end + CONTEXT_END.length;
}

/** The words of a `<user_query>` block after the context, if the template had one. */
function userQueryBlock(tail: string): string | undefined {
  const match = /<user_query>\n([\s\S]*?)\n<\/user_query>/.exec(tail);
  return match?.[1];
}

/**
 * The person's own words in a user message Open WebUI rewrote with its RAG template, or undefined
 * when `text` is not such a message (or the words cannot be told apart from the template).
 */
export function ragQueryOf(text: string): string | undefined {
  const at = text.indexOf(RAG_TEMPLATE_OPENING);
  if (at < 0) return undefined;
  const template = text.slice(at);
  const contextEnd = contextEndOf(template);
  if (contextEnd < 0 || !template.includes("<context>\n")) return undefined;
  const afterContext = template.slice(contextEnd);
  let words: string | undefined;
  if (at > 0) {
    // Appended: the words come first, a newline before the template.
    if (text[at - 1] !== "\n") return undefined;
    words = text.slice(0, at - 1);
  } else {
    // Prepended: the template ends with its context block, then a newline, then the words.
    words = userQueryBlock(afterContext) ?? (afterContext.startsWith("\n") ? afterContext.slice(1) : undefined);
  }
  return words && words.trim() ? words : undefined;
}
