/**
 * What Open WebUI and LibreChat send an OpenAI-compatible connection, rebuilt from their source so
 * tests send the same bytes: Open WebUI's default task templates (`backend/open_webui/config.py`),
 * rendered as `backend/open_webui/utils/task.py` renders them; its RAG rewrite of a user message
 * (`DEFAULT_RAG_TEMPLATE`, `rag_template`, prepended by `add_or_update_user_message(..., append=False)`
 * in `utils/middleware.py`); its forwarded headers (`routers/openai.py` `get_headers_and_cookies`,
 * `utils/headers.py`); LibreChat's title prompt (`@librechat/agents` `src/utils/title.ts`, `src/run.ts`).
 */

type Msg = { role: string; content: string };

/** `DEFAULT_TITLE_GENERATION_PROMPT_TEMPLATE` (Open WebUI config.py). */
export const TITLE_TEMPLATE = `### Task:
Generate a concise title summarizing the chat history.
### Guidelines:
- The title should clearly represent the main theme or subject of the conversation.
- Keep it short: 2-4 words is best.
- Do not use emojis, quotation marks, or special formatting.
- Write the title in the chat's primary language; default to English if multilingual.
- Prioritize accuracy over creativity.
- Your entire response must consist solely of the JSON object, without any introductory or concluding text.
- The output must be a single, raw JSON object, without any markdown code fences or other encapsulating text.
- Ensure no conversational text, affirmations, or explanations precede or follow the raw JSON output, as this will cause direct parsing failure.
### Output:
JSON format: { "title": "your concise title here" }
### Examples:
- { "title": "Stock Trends" },
- { "title": "Chocolate Chip Cookies" },
- { "title": "Music Streaming" },
- { "title": "Remote Work" }
### Chat History:
<chat_history>
{{MESSAGES:END:2}}
</chat_history>`;

/** The title template of Open WebUI 0.5/0.6 (config.py then), still common in deployed instances. */
export const TITLE_TEMPLATE_0_6 = `### Task:
Generate a concise, 3-5 word title with an emoji summarizing the chat history.
### Guidelines:
- The title should clearly represent the main theme or subject of the conversation.
- Use emojis that enhance understanding of the topic, but avoid quotation marks or special formatting.
- Write the title in the chat's primary language; default to English if multilingual.
- Prioritize accuracy over excessive creativity; keep it clear and simple.
### Output:
JSON format: { "title": "your concise title here" }
### Examples:
- { "title": "📉 Stock Market Trends" },
- { "title": "🍪 Perfect Chocolate Chip Recipe" },
- { "title": "Evolution of Music Streaming" },
- { "title": "Remote Work Productivity Tips" },
- { "title": "Artificial Intelligence in Healthcare" },
- { "title": "🎮 Video Game Development Insights" }
### Chat History:
<chat_history>
{{MESSAGES:END:2}}
</chat_history>`;

/** `DEFAULT_TAGS_GENERATION_PROMPT_TEMPLATE`. */
export const TAGS_TEMPLATE = `### Task:
Generate 1-3 broad tags categorizing the main themes of the chat history, along with 1-3 more specific subtopic tags.

### Guidelines:
- Start with high-level domains (e.g. Science, Technology, Philosophy, Arts, Politics, Business, Health, Sports, Entertainment, Education)
- Consider including relevant subfields/subdomains if they are strongly represented throughout the conversation
- If content is too short (less than 3 messages) or too diverse, use only ["General"]
- Use the chat's primary language; default to English if multilingual
- Prioritize accuracy over specificity

### Output:
JSON format: { "tags": ["tag1", "tag2", "tag3"] }

### Chat History:
<chat_history>
{{MESSAGES:END:6}}
</chat_history>`;

/** `DEFAULT_IMAGE_PROMPT_GENERATION_PROMPT_TEMPLATE` (its typo "am image" included). */
export const IMAGE_PROMPT_TEMPLATE = `### Task:
Generate a detailed prompt for am image generation task based on the given language and context. Describe the image as if you were explaining it to someone who cannot see it. Include relevant details, colors, shapes, and any other important elements.

### Guidelines:
- Be descriptive and detailed, focusing on the most important aspects of the image.
- Avoid making assumptions or adding information not present in the image.
- Use the chat's primary language; default to English if multilingual.
- If the image is too complex, focus on the most prominent elements.

### Output:
Strictly return in JSON format:
{
    "prompt": "Your detailed description here."
}

### Chat History:
<chat_history>
{{MESSAGES:END:6}}
</chat_history>`;

/** `DEFAULT_FOLLOW_UP_GENERATION_PROMPT_TEMPLATE`. */
export const FOLLOW_UP_TEMPLATE = `### Task:
Suggest 3-5 relevant follow-up questions or prompts that the user might naturally ask next in this conversation as a **user**, based on the chat history, to help continue or deepen the discussion.
### Guidelines:
- Write all follow-up questions from the user’s point of view, directed to the assistant.
- Make questions concise, clear, and directly related to the discussed topic(s).
- Only suggest follow-ups that make sense given the chat content and do not repeat what was already covered.
- If the conversation is very short or not specific, suggest more general (but relevant) follow-ups the user might ask.
- Use the conversation's primary language; default to English if multilingual.
- Response must be a JSON object with a "follow_ups" key containing an array of strings, no extra text or formatting.
### Output:
JSON format: { "follow_ups": ["Question 1?", "Question 2?", "Question 3?"] }
### Chat History:
<chat_history>
{{MESSAGES:END:6}}
</chat_history>`;

/** `DEFAULT_QUERY_GENERATION_PROMPT_TEMPLATE`. */
export const QUERY_TEMPLATE = `### Task:
Analyze the chat history to determine the necessity of generating search queries, in the given language. By default, **prioritize generating 1-3 broad and relevant search queries** unless it is absolutely certain that no additional information is required. The aim is to retrieve comprehensive, updated, and valuable information even with minimal uncertainty. If no search is unequivocally needed, return an empty list.

### Guidelines:
- Respond **EXCLUSIVELY** with a JSON object. Any form of extra commentary, explanation, or additional text is strictly prohibited.
- When generating search queries, respond in the format: { "queries": ["query1", "query2"] }, ensuring each query is distinct, concise, and relevant to the topic.
- If and only if it is entirely certain that no useful results can be retrieved by a search, return: { "queries": [] }.
- Err on the side of suggesting search queries if there is **any chance** they might provide useful or updated information.
- Be concise and focused on composing high-quality search queries, avoiding unnecessary elaboration, commentary, or assumptions.
- Today's date is: {{CURRENT_DATE}}.
- Always prioritize providing actionable and broad queries that maximize informational coverage.

### Output:
Strictly return in JSON format: 
{
  "queries": ["query1", "query2"]
}

### Chat History:
<chat_history>
{{MESSAGES:END:6}}
</chat_history>
`;

/** `DEFAULT_AUTOCOMPLETE_GENERATION_PROMPT_TEMPLATE` (its trailing double spaces included). */
export const AUTOCOMPLETE_TEMPLATE = `### Task:
You are an autocompletion system. Continue the text in \`<text>\` based on the **completion type** in \`<type>\` and the given language.  

### **Instructions**:
1. Analyze \`<text>\` for context and meaning.  
2. Use \`<type>\` to guide your output:  
   - **General**: Provide a natural, concise continuation.  
   - **Search Query**: Complete as if generating a realistic search query.  
3. Start as if you are directly continuing \`<text>\`. Do **not** repeat, paraphrase, or respond as a model. Simply complete the text.  
4. Ensure the continuation:
   - Flows naturally from \`<text>\`.  
   - Avoids repetition, overexplaining, or unrelated ideas.  
5. If unsure, return: \`{ "text": "" }\`.  

### **Output Rules**:
- Respond only in JSON format: \`{ "text": "<your_completion>" }\`.

### **Examples**:
#### Example 1:  
Input:  
<type>General</type>  
<text>The sun was setting over the horizon, painting the sky</text>  
Output:  
{ "text": "with vibrant shades of orange and pink." }

#### Example 2:  
Input:  
<type>Search Query</type>  
<text>Top-rated restaurants in</text>  
Output:  
{ "text": "New York City for Italian cuisine." }  

---
### Context:
<chat_history>
{{MESSAGES:END:6}}
</chat_history>
<type>{{TYPE}}</type>  
<text>{{PROMPT}}</text>  
#### Output:
`;

/** `DEFAULT_EMOJI_GENERATION_PROMPT_TEMPLATE`. */
export const EMOJI_TEMPLATE = `Your task is to reflect the speaker's likely facial expression through a fitting emoji. Interpret emotions from the message and reflect their facial expression using fitting, diverse emojis (e.g., 😊, 😢, 😡, 😱).

Message: \`\`\`{{prompt}}\`\`\``;

/** `DEFAULT_TOOLS_FUNCTION_CALLING_PROMPT_TEMPLATE`. */
export const TOOLS_TEMPLATE = `Available Tools: {{TOOLS}}

Your task is to choose and return the correct tool(s) from the list of available tools based on the query. Follow these guidelines:

- Return only the JSON object, without any additional text or explanation.

- If no tools match the query, return an empty array: 
   {
     "tool_calls": []
   }

- If one or more tools match the query, construct a JSON response containing a "tool_calls" array with objects that include:
   - "name": The tool's name.
   - "parameters": A dictionary of required parameters and their corresponding values.

The format for the JSON response is strictly:
{
  "tool_calls": [
    {"name": "toolName1", "parameters": {"key1": "value1"}},
    {"name": "toolName2", "parameters": {"key2": "value2"}}
  ]
}`;

/** `DEFAULT_RAG_TEMPLATE`. */
export const RAG_TEMPLATE = `### Task:
Respond to the user query using the provided context, incorporating inline citations in the format [id] **only when the <source> tag includes an explicit id attribute** (e.g., <source id="1">).

### Guidelines:
- If you don't know the answer, clearly state that.
- If uncertain, ask the user for clarification.
- Respond in the same language as the user's query.
- If the context is unreadable or of poor quality, inform the user and provide the best possible answer.
- If the answer isn't present in the context but you possess the knowledge, explain this to the user and provide the answer using your own understanding.
- **Only include inline citations using [id] (e.g., [1], [2]) when the <source> tag includes an id attribute.**
- Do not cite if the <source> tag does not contain an id attribute.
- Do not use XML tags in your response.
- Ensure citations are concise and directly related to the information provided.

### Example of Citation:
If the user asks about a specific topic and the information is found in a source with a provided id attribute, the response should include the citation like in the following example:
* "According to the study, the proposed method increases efficiency by 20% [1]."

### Output:
Provide a clear and direct response to the user's query, including inline citations in the format [id] only when the <source> tag with id attribute is present in the context.

<context>
{{CONTEXT}}
</context>
`;

/** An older RAG template with the query inside it (`<user_query>` … `{{QUERY}}`). */
export const RAG_TEMPLATE_WITH_QUERY = `### Task:
Respond to the user query using the provided context, incorporating inline citations in the format [source_id] **only when the <source_id> tag is explicitly provided** in the context.

### Guidelines:
- If you don't know the answer, clearly state that.

<context>
{{CONTEXT}}
</context>

<user_query>
{{QUERY}}
</user_query>
`;

/** `utils/misc.py` `get_messages_content`: `ROLE: content` lines. */
function messagesContent(messages: Msg[]): string {
  return messages.map((m) => `${m.role.toUpperCase()}: ${m.content}`).join("\n");
}

/** `utils/task.py` `prompt_template`: the date and user variables. */
function promptTemplate(template: string): string {
  const now = new Date();
  const date = now.toISOString().slice(0, 10);
  return template
    .replaceAll("{{CURRENT_DATE}}", date)
    .replaceAll("{{CURRENT_TIME}}", "12:00:00 PM")
    .replaceAll("{{CURRENT_DATETIME}}", `${date} 12:00:00 PM`)
    .replaceAll("{{USER_NAME}}", "Unknown")
    .replaceAll("{{USER_LOCATION}}", "Unknown");
}

/** `utils/task.py` `replace_messages_variable` (`{{MESSAGES}}`, `{{MESSAGES:START:n}}`, `{{MESSAGES:END:n}}`). */
function replaceMessages(template: string, messages: Msg[]): string {
  return template.replace(
    /\{\{MESSAGES(?::(START|END):(\d+))?\}\}/g,
    (_all, side: string | undefined, n: string | undefined) => {
      if (!side) return messagesContent(messages);
      return messagesContent(side === "START" ? messages.slice(0, Number(n)) : messages.slice(-Number(n)));
    },
  );
}

/** `utils/task.py` `replace_prompt_variable` (case-insensitive `{{prompt}}`). */
function replacePrompt(template: string, prompt: string): string {
  return template.replace(/\{\{prompt\}\}/gi, () => prompt);
}

/** An Open WebUI task prompt rendered from `template` over the chat `messages` (title, tags, follow-ups, queries, image prompt). */
export function renderTask(template: string, messages: Msg[]): string {
  const lastUser = [...messages].reverse().find((m) => m.role === "user")?.content ?? "";
  return promptTemplate(replaceMessages(replacePrompt(template, lastUser), messages));
}

/** `autocomplete_generation_template`. */
export function renderAutocomplete(prompt: string, messages: Msg[], type = "General"): string {
  return promptTemplate(
    replaceMessages(replacePrompt(AUTOCOMPLETE_TEMPLATE.replaceAll("{{TYPE}}", type), prompt), messages),
  );
}

/** `emoji_generation_template`. */
export function renderEmoji(prompt: string): string {
  return promptTemplate(replacePrompt(EMOJI_TEMPLATE, prompt));
}

/**
 * The messages of Open WebUI's tool selection request (`get_tools_function_calling_payload`):
 * the tools template as system message, the last four messages and the query as the user message.
 */
export function toolSelectionMessages(tools: unknown[], messages: Msg[]): Msg[] {
  const history = messages.slice(0, -1).slice(-4);
  const query = messages.at(-1)?.content ?? "";
  const chat = history.map((m) => `${m.role.toUpperCase()}: """${m.content}"""`).join("\n");
  return [
    { role: "system", content: TOOLS_TEMPLATE.replace("{{TOOLS}}", JSON.stringify(tools)) },
    { role: "user", content: chat ? `History:\n${chat}\nQuery: ${query}` : `Query: ${query}` },
  ];
}

/** A source as Open WebUI puts it in the RAG context (`get_source_context`). */
export function ragSource(id: number, name: string, text: string): string {
  return `<source id="${id}" name="${name}">${text}</source>`;
}

/**
 * A user message as Open WebUI rewrites it on a retrieval turn: `rag_template` renders the template
 * with the context, and `add_or_update_user_message(..., append=False)` puts it before the words.
 */
export function ragRendered(words: string, context: string, template = RAG_TEMPLATE): string {
  const rendered = promptTemplate(template).replaceAll("{{CONTEXT}}", context).replaceAll("{{QUERY}}", words);
  return `${rendered}\n${words}`;
}

/** Open WebUI's user-info headers with `ENABLE_FORWARD_USER_INFO_HEADERS=true`, and the chat id when the request has one. */
export function openWebUiHeaders(
  chatId: string | undefined,
  user = { id: "3f6d1c2a-9b1e-4c55-8a0f-6f2c1a7e9d10", name: "Ada Lovelace", email: "ada@example.com", role: "user" },
): Record<string, string> {
  return {
    "X-OpenWebUI-User-Name": encodeURIComponent(user.name).replaceAll("%20", " "),
    "X-OpenWebUI-User-Id": user.id,
    "X-OpenWebUI-User-Email": user.email,
    "X-OpenWebUI-User-Role": user.role,
    ...(chatId ? { "X-OpenWebUI-Chat-Id": chatId } : {}),
  };
}

/**
 * A connection's custom headers as Open WebUI resolves them (`utils/headers.py` `parse_custom_headers`):
 * `{{CHAT_ID}}` is the request's chat id, `{{TASK}}` its task (`""` on a chat turn).
 */
export function customHeaders(
  template: Record<string, string>,
  vars: { chatId?: string; task?: string },
): Record<string, string> {
  const resolved: Record<string, string> = {};
  for (const [name, value] of Object.entries(template)) {
    resolved[name] = value.replaceAll("{{CHAT_ID}}", vars.chatId ?? "").replaceAll("{{TASK}}", vars.task ?? "");
  }
  return resolved;
}

/** LibreChat's title prompt (`defaultCompletionPrompt` over `User: {input}\nAI: {output}`). */
export function libreChatTitlePrompt(input: string, output: string): string {
  return `Provide a concise, 5-word-or-less title for the conversation, using title case conventions. Only return the title itself.\n\nConversation:\nUser: ${input}\nAI: ${output}`;
}

/** LibreChat's structured title prompt (`defaultTitlePrompt`). */
export function libreChatStructuredTitlePrompt(input: string, output: string): string {
  return `Analyze this conversation and provide:\n1. The detected language of the conversation\n2. A concise title in the detected language (5 words or less, no punctuation or quotation)\n\nUser: ${input}\nAI: ${output}`;
}

/** The text of a chat completions SSE stream (its `delta.content`s). */
export function streamedText(sse: string): string {
  return sse
    .split("\n")
    .filter((line) => line.startsWith("data: {"))
    .map((line) => JSON.parse(line.slice(6)).choices?.[0]?.delta?.content ?? "")
    .join("");
}
