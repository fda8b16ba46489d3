import { describe, expect, it } from "vitest";
import {
  AUTOCOMPLETE_TEMPLATE,
  FOLLOW_UP_TEMPLATE,
  IMAGE_PROMPT_TEMPLATE,
  libreChatStructuredTitlePrompt,
  libreChatTitlePrompt,
  QUERY_TEMPLATE,
  RAG_TEMPLATE,
  ragRendered,
  ragSource,
  renderAutocomplete,
  renderEmoji,
  renderTask,
  TAGS_TEMPLATE,
  TITLE_TEMPLATE,
  TITLE_TEMPLATE_0_6,
  toolSelectionMessages,
} from "../../../test/_front-ends.js";
import { sideRequestOf, taskOfHeader } from "./side-requests.js";
import { taskOfPrompt } from "./task-prompts.js";

const chat = [
  { role: "user", content: "How do I keep basil alive on a windowsill?" },
  { role: "assistant", content: "Give it 6 hours of sun and water when the topsoil is dry." },
  { role: "user", content: "And in winter?" },
  { role: "assistant", content: "Use a grow light and water less." },
];
const user = (content: string) => [{ role: "user", content }];

describe("taskOfPrompt", () => {
  it("recognises every Open WebUI default task template, rendered over a chat", () => {
    expect(taskOfPrompt(user(renderTask(TITLE_TEMPLATE, chat)))).toBe("title");
    expect(taskOfPrompt(user(renderTask(TITLE_TEMPLATE_0_6, chat)))).toBe("title");
    expect(taskOfPrompt(user(renderTask(TAGS_TEMPLATE, chat)))).toBe("tags");
    expect(taskOfPrompt(user(renderTask(FOLLOW_UP_TEMPLATE, chat)))).toBe("follow_ups");
    expect(taskOfPrompt(user(renderTask(QUERY_TEMPLATE, chat)))).toBe("queries");
    expect(taskOfPrompt(user(renderTask(IMAGE_PROMPT_TEMPLATE, chat)))).toBe("image_prompt");
    expect(taskOfPrompt(user(renderAutocomplete("How often should I", chat)))).toBe("autocomplete");
    expect(taskOfPrompt(user(renderAutocomplete("basil", [], "Search Query")))).toBe("autocomplete");
    expect(taskOfPrompt(user(renderEmoji("I finally got my basil to flower!")))).toBe("emoji");
    expect(taskOfPrompt(toolSelectionMessages([{ name: "get_weather" }], chat))).toBe("function_calling");
  });

  it("allows a task model's system prompt before the task, in its own message or merged into the tools one", () => {
    expect(
      taskOfPrompt([{ role: "system", content: "You are terse." }, ...user(renderTask(TITLE_TEMPLATE, chat))]),
    ).toBe("title");
    const [tools, query] = toolSelectionMessages([], chat);
    expect(taskOfPrompt([{ role: "system", content: `You are terse.\n${tools.content}` }, query])).toBe(
      "function_calling",
    );
  });

  it("recognises LibreChat's title prompts", () => {
    expect(taskOfPrompt(user(libreChatTitlePrompt("hi there", "Hello! How can I help?")))).toBe("title");
    expect(taskOfPrompt(user(libreChatStructuredTitlePrompt("hi there", "Hello!")))).toBe("title");
  });

  it("keeps a turn a turn when it only mentions a template's words", () => {
    const followUps = renderTask(FOLLOW_UP_TEMPLATE, chat);
    // The same prompt inside a longer chat: a person pasted it.
    expect(taskOfPrompt([...chat, { role: "user", content: followUps }])).toBeUndefined();
    // Its opening and output line, but not the template's structure.
    expect(
      taskOfPrompt(
        user(
          '### Task:\nSuggest 3-5 relevant follow-up questions about basil.\n### Output:\nJSON format: { "follow_ups": [] }',
        ),
      ),
    ).toBeUndefined();
    expect(taskOfPrompt(user('Why does Open WebUI ask for { "title": "…" } in <chat_history>?'))).toBeUndefined();
    expect(
      taskOfPrompt(user("Provide a concise, 5-word-or-less title for the conversation, using title case conventions.")),
    ).toBeUndefined();
    expect(taskOfPrompt(user(`${followUps}\nThanks!`))).toBeUndefined();
  });

  it("never takes a RAG-rewritten message for a task", () => {
    const rag = ragRendered("What does my file say about watering?", ragSource(1, "basil.md", "Water every 3 days."));
    expect(rag.startsWith("### Task:\nRespond to the user query")).toBe(true);
    expect(taskOfPrompt(user(rag))).toBeUndefined();
    expect(taskOfPrompt([...chat, { role: "user", content: rag }])).toBeUndefined();
    expect(taskOfPrompt(user(RAG_TEMPLATE))).toBeUndefined();
  });

  it("looks only at the last message being the user's, after system messages", () => {
    expect(taskOfPrompt([])).toBeUndefined();
    expect(taskOfPrompt([{ role: "assistant", content: renderTask(TITLE_TEMPLATE, chat) }])).toBeUndefined();
    expect(taskOfPrompt([{ role: "user", content: [{ type: "text", text: renderTask(TAGS_TEMPLATE, chat) }] }])).toBe(
      "tags",
    );
    expect(
      taskOfPrompt([{ role: "user", content: [{ type: "image_url", image_url: { url: "data:," } }] }]),
    ).toBeUndefined();
    expect(AUTOCOMPLETE_TEMPLATE).toContain("#### Output:");
  });
});

describe("side requests by header", () => {
  it("takes X-Threadkeep-Task as Open WebUI's {{TASK}} fills it; empty (a chat turn) or unresolved is no task", () => {
    expect(taskOfHeader("title_generation")).toBe("title");
    expect(taskOfHeader("follow_up_generation")).toBe("follow_ups");
    expect(taskOfHeader("function_calling")).toBe("function_calling");
    expect(taskOfHeader("Tags")).toBe("tags");
    expect(taskOfHeader("summarize_for_crm")).toBe("other");
    expect(taskOfHeader("")).toBeUndefined();
    expect(taskOfHeader("{{TASK}}")).toBeUndefined();
    expect(taskOfHeader(undefined)).toBeUndefined();
    expect(sideRequestOf(chat, { "x-threadkeep-task": "" })).toBeUndefined();
    expect(sideRequestOf(chat, { "x-threadkeep-task": "tags_generation" })).toBe("tags");
    expect(sideRequestOf(user(renderTask(TITLE_TEMPLATE, chat)), {})).toBe("title");
  });
});
