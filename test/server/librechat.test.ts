/**
 * threadkeep as a LibreChat custom endpoint, with the documented header
 * `X-Conversation-Id: '{{LIBRECHAT_BODY_CONVERSATIONID}}'` (resolved by LibreChat's
 * `packages/api/src/utils/env.ts` `resolveHeaders`, also for the title request:
 * `api/server/controllers/agents/client.js` `titleConvo`). LibreChat sends the whole history on every
 * turn, streamed (`stream_options.include_usage`, as langchain's ChatOpenAI asks), and, with
 * `titleConvo: true`, a title request beside the first turn (`titleTiming: immediate`): one user
 * message of `@librechat/agents`' title prompt over `User: {input}\nAI: {output}`, not streamed
 * (`stream` is in `omitTitleOptions`).
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { libreChatStructuredTitlePrompt, libreChatTitlePrompt, streamedText } from "../_front-ends.js";
import { type Stack, startStack, transcript } from "./_stack.js";

type Msg = { role: string; content: string };

const MODEL = "mistral-small";
const TITLE_MODEL = "mistral-tiny";
const INSTRUCTIONS: Msg = { role: "system", content: "You are a concise travel assistant." };

let stack: Stack;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tk-librechat-"));
  stack = await startStack({ store: `sqlite:${join(dir, "t.db")}` });
  stack.fake.setReply((body) => {
    if (body.model === TITLE_MODEL) return { content: "Weekend In Lisbon" };
    const last: string = body.messages.at(-1)?.content ?? "";
    const first = body.messages.filter((m: Msg) => m.role === "user").length === 1;
    return { content: `Answer to "${last}", long enough to stream in many small chunks.`, delayMs: first ? 20 : 0 };
  });
});
afterAll(async () => {
  await stack?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A LibreChat conversation on a custom endpoint pointed at threadkeep. */
class LibreChatConversation {
  messages: Msg[] = [];
  constructor(
    readonly conversationId: string = randomUUID(),
    readonly extraHeaders: Record<string, string> = {},
  ) {}

  /** The endpoint's `headers:` as LibreChat resolves them, and what the OpenAI SDK adds. */
  headers(): Record<string, string> {
    return {
      Authorization: "Bearer sk-librechat-endpoint",
      "X-Conversation-Id": this.conversationId,
      "User-Agent": "OpenAI/JS 5.23.2",
      "X-Stainless-Lang": "js",
      ...this.extraHeaders,
    };
  }

  /** Starts a turn (the whole thread, streamed); resolves once the response head arrived. */
  async start(text: string): Promise<{ response: Response; finished: Promise<number> }> {
    this.messages.push({ role: "user", content: text });
    const response = await stack.request("POST", "/v1/chat/completions", {
      body: {
        model: MODEL,
        stream: true,
        stream_options: { include_usage: true },
        messages: [INSTRUCTIONS, ...this.messages],
      },
      headers: this.headers(),
    });
    const finished = response.text().then((sse) => {
      this.messages.push({ role: "assistant", content: streamedText(sse) });
      return performance.now();
    });
    return { response, finished };
  }

  async turn(text: string): Promise<Response> {
    const { response, finished } = await this.start(text);
    await finished;
    return response;
  }

  /** The title request; `sent` is its body. */
  async title(
    prompt: string,
    extra: Record<string, unknown> = {},
  ): Promise<{ response: Response; sent: any; since: number }> {
    const since = stack.fake.chatRequests().length;
    const sent = { model: TITLE_MODEL, messages: [{ role: "user", content: prompt }], stream: false, ...extra };
    const response = await stack.request("POST", "/v1/chat/completions", { body: sent, headers: this.headers() });
    return { response, sent, since };
  }
}

const sessionIds = async () => new Set((await stack.memory.listSessions({ limit: 1000 })).sessions.map((s) => s.id));
const mainLine = async (id: string) =>
  (await stack.memory.getMessages(id)).map((m) => ({ role: m.role, content: m.content }));

/** The title was answered by the upstream with exactly what LibreChat sent, and not kept. */
async function expectTitlePassedThrough(title: { response: Response; sent: any; since: number }) {
  expect(title.response.status).toBe(200);
  expect(title.response.headers.get("x-session-id")).toBeNull();
  expect(title.response.headers.get("x-threadkeep-pass-through")).toBe("title");
  expect(((await title.response.json()) as any).choices[0].message.content).toBe("Weekend In Lisbon");
  const upstream = stack.fake
    .chatRequests()
    .slice(title.since)
    .filter((r) => r.body.model === TITLE_MODEL);
  expect(upstream.map((r) => r.body)).toEqual([title.sent]);
}

describe("LibreChat custom endpoint with X-Conversation-Id: {{LIBRECHAT_BODY_CONVERSATIONID}}", () => {
  it("keeps the conversation as one session and answers the title while the first turn streams, storing none of it", async () => {
    const before = await sessionIds();
    const convo = new LibreChatConversation();
    const first = await convo.start("Plan a weekend in Lisbon");
    expect(first.response.headers.get("x-session-id")).toBe(convo.conversationId);
    // titleTiming `immediate`: the title runs beside the response, before any of it is known.
    const title = await convo.title(libreChatTitlePrompt("Plan a weekend in Lisbon", ""));
    const titleAt = performance.now();
    expect(titleAt).toBeLessThan(await first.finished);
    await expectTitlePassedThrough(title);

    await convo.turn("Which day is best for Sintra?");
    const third = await convo.turn("And where should we eat?");
    expect(third.headers.get("x-session-id")).toBe(convo.conversationId);
    const lastTurn = stack.fake
      .chatRequests()
      .filter((r) => r.body.model === MODEL)
      .at(-1)!;
    expect(transcript(lastTurn.body)).toEqual(transcript({ messages: [INSTRUCTIONS, ...convo.messages.slice(0, -1)] }));
    expect(lastTurn.body.stream_options).toEqual({ include_usage: true });
    expect(await mainLine(convo.conversationId)).toEqual(convo.messages);
    expect([...(await sessionIds())].filter((id) => !before.has(id))).toEqual([convo.conversationId]);
  });

  it("passes the structured title method through as sent", async () => {
    const convo = new LibreChatConversation();
    await convo.turn("Plan a weekend in Lisbon");
    // Langchain's withStructuredOutput asks through a forced function call.
    const tool = {
      type: "function",
      function: {
        name: "extract",
        description: "",
        parameters: {
          type: "object",
          properties: { language: { type: "string" }, title: { type: "string" } },
          required: ["language", "title"],
        },
      },
    };
    const title = await convo.title(
      libreChatStructuredTitlePrompt("Plan a weekend in Lisbon", convo.messages[1].content),
      {
        tools: [tool],
        tool_choice: { type: "function", function: { name: "extract" } },
      },
    );
    await expectTitlePassedThrough(title);
    expect((await mainLine(convo.conversationId)).length).toBe(2);
  });

  it("follows a regenerate and an edit of the thread, keeping what they replaced as branches", async () => {
    const convo = new LibreChatConversation(randomUUID(), { "X-Threadkeep-Client": "whole-history" });
    await convo.turn("Plan a weekend in Lisbon");
    await convo.turn("Which day is best for Sintra?");
    const replaced = convo.messages.pop()!;
    const question = convo.messages.pop()!;
    await convo.turn(question.content);
    expect(await mainLine(convo.conversationId)).toEqual(convo.messages);
    convo.messages = convo.messages.slice(0, 2);
    await convo.turn("Which day is best for Cascais?");
    expect(await mainLine(convo.conversationId)).toEqual(convo.messages);
    const branches = await stack.memory.listBranches(convo.conversationId);
    expect(branches.map((b) => b.reason)).toEqual(["regenerate", "edit"]);
    expect(branches[0].messages.map((m) => m.content)).toEqual([replaced.content]);
  });

  it("opens a new session when LibreChat could not resolve the placeholder, and says which", async () => {
    const convo = new LibreChatConversation("{{LIBRECHAT_BODY_CONVERSATIONID}}");
    const response = await convo.turn("Plan a weekend in Lisbon");
    expect(response.status).toBe(200);
    const id = response.headers.get("x-session-id")!;
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(await mainLine(id)).toEqual(convo.messages);
  });

  it("refuses an X-Threadkeep-Client it does not know, with a clear error", async () => {
    const convo = new LibreChatConversation(randomUUID(), { "X-Threadkeep-Client": "full" });
    const response = await stack.request("POST", "/v1/chat/completions", {
      body: { model: MODEL, messages: [{ role: "user", content: "hi" }] },
      headers: convo.headers(),
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as any).error).toMatchObject({
      code: "invalid_request",
      message: expect.stringContaining("whole-history or thin"),
    });
    expect(await sessionIds()).not.toContain(convo.conversationId);
  });
});
