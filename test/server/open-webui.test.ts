/**
 * threadkeep in front of what Open WebUI really sends an OpenAI connection (rebuilt from its source
 * in test/_front-ends.ts): chat turns with the whole history, streamed; its background tasks on the
 * chat's id (title, tags, follow-ups, tool selection: one user message embedding the chat, not
 * streamed); temporary chats (`local:` ids); retrieval turns whose user message is rewritten with
 * the RAG template. Both setups: the forwarded `X-OpenWebUI-*` headers
 * (`ENABLE_FORWARD_USER_INFO_HEADERS=true`), and a connection's custom header `X-Session-ID: {{CHAT_ID}}`.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  customHeaders,
  FOLLOW_UP_TEMPLATE,
  openWebUiHeaders,
  ragRendered,
  ragSource,
  renderTask,
  streamedText,
  TAGS_TEMPLATE,
  TITLE_TEMPLATE,
  toolSelectionMessages,
} from "../_front-ends.js";
import { type Stack, startStack, transcript } from "./_stack.js";

type Msg = { role: string; content: string };
type Setup = "forwarded" | "custom";
/** A task request: what it sent, its answer, and how many upstream requests came before it. */
type Task = { response: Response; sent: any; json: any; since: number };

const MODEL = "llama3.2:3b";
const SYSTEM: Msg = { role: "system", content: "You are a gardening assistant." };

let stack: Stack;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tk-owui-"));
  stack = await startStack({ store: `sqlite:${join(dir, "t.db")}` });
  stack.fake.setReply((body) => {
    const last: string = body.messages.at(-1)?.content ?? "";
    if (last.includes('{ "title":')) return { content: '{ "title": "Basil Care" }' };
    if (last.includes('{ "tags":')) return { content: '{ "tags": ["Gardening"] }' };
    if (last.includes('{ "follow_ups":')) return { content: '{ "follow_ups": ["What about mint?"] }' };
    if (body.messages[0]?.content?.startsWith("Available Tools:")) return { content: '{ "tool_calls": [] }' };
    // A chat turn. A chat's first one streams slowly, so a task can arrive while it still streams.
    const words = last.length > 60 ? `${last.slice(0, 30)}…` : last;
    const first = body.stream && body.messages.filter((m: Msg) => m.role === "user").length === 1;
    return { content: `Answer to "${words}", at some length so it streams in many chunks.`, delayMs: first ? 20 : 0 };
  });
});
afterAll(async () => {
  await stack?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** One Open WebUI chat: it keeps the conversation and sends what Open WebUI sends. */
class OpenWebUiChat {
  messages: Msg[] = [];
  constructor(
    readonly setup: Setup,
    readonly chatId: string = randomUUID(),
  ) {}

  /** The headers of a request of this chat; `chatId` undefined for a request without one (tool selection). */
  headers(chatId: string | undefined = this.chatId): Record<string, string> {
    // The custom-header setup as docs/integrations.md recommends it: the chat's id, and the declaration
    // that every request carries the whole chat (forwarded headers imply it by X-OpenWebUI-Chat-Id).
    return this.setup === "forwarded"
      ? openWebUiHeaders(chatId)
      : customHeaders({ "X-Session-ID": "{{CHAT_ID}}", "X-Threadkeep-Client": "whole-history" }, { chatId });
  }

  /** Starts a chat turn (the whole history, streamed); resolves once the response head arrived. */
  async start(text: string): Promise<{ response: Response; finished: Promise<{ text: string; at: number }> }> {
    this.messages.push({ role: "user", content: text });
    const response = await stack.request("POST", "/v1/chat/completions", {
      body: { model: MODEL, messages: [SYSTEM, ...this.messages], stream: true },
      headers: this.headers(),
    });
    const finished = response.text().then((sse) => {
      const answer = streamedText(sse);
      this.messages.push({ role: "assistant", content: answer });
      return { text: answer, at: performance.now() };
    });
    return { response, finished };
  }

  /** A whole chat turn. */
  async turn(text: string): Promise<Response> {
    const { response, finished } = await this.start(text);
    await finished;
    return response;
  }

  /** Regenerates the last answer: the same conversation without it. */
  async regenerate(): Promise<Response> {
    const last = this.messages.pop();
    expect(last?.role).toBe("assistant");
    const user = this.messages.pop() as Msg;
    return this.turn(user.content);
  }

  /** Edits the `nth` user message (0-based) and drops what followed it. */
  async edit(nth: number, text: string): Promise<Response> {
    const at = this.messages.map((m, i) => [m, i] as const).filter(([m]) => m.role === "user")[nth][1];
    this.messages = this.messages.slice(0, at);
    return this.turn(text);
  }

  /** A background task as `routers/tasks.py` sends it: one user message, not streamed. */
  async task(template: string, extra: Record<string, unknown> = {}): Promise<Task> {
    const since = stack.fake.chatRequests().length;
    const sent = {
      model: MODEL,
      messages: [{ role: "user", content: renderTask(template, this.messages) }],
      stream: false,
      ...extra,
    };
    const response = await stack.request("POST", "/v1/chat/completions", { body: sent, headers: this.headers() });
    return { response, sent, json: await response.json(), since };
  }
}

const sessionIds = async () => new Set((await stack.memory.listSessions({ limit: 1000 })).sessions.map((s) => s.id));
const mainLine = async (id: string) =>
  (await stack.memory.getMessages(id)).map((m) => ({ role: m.role, content: m.content }));
/** The upstream requests since the `since`th that carried `sent`'s messages. */
const upstreamOf = (sent: any, since: number) =>
  stack.fake
    .chatRequests()
    .slice(since)
    .filter((r) => JSON.stringify(r.body.messages) === JSON.stringify(sent.messages));
const sideCount = (kind: string) => stack.server.metrics.sideRequests.get({ kind });

/** A task was answered by the upstream with exactly what it sent, and nothing of it kept. */
async function expectPassedThrough(task: Task, kind: string, answer: RegExp = /^\{ "/) {
  expect(task.response.status).toBe(200);
  expect(task.response.headers.get("x-session-id")).toBeNull();
  expect(task.response.headers.get("x-threadkeep-pass-through")).toBe(kind);
  const upstream = upstreamOf(task.sent, task.since);
  expect(upstream).toHaveLength(1);
  expect(upstream[0].body).toEqual(task.sent);
  expect(task.json.choices[0].message.content).toMatch(answer);
}

for (const setup of ["forwarded", "custom"] as const) {
  describe(`Open WebUI (${setup === "forwarded" ? "ENABLE_FORWARD_USER_INFO_HEADERS" : "custom header X-Session-ID: {{CHAT_ID}}"})`, () => {
    it("keeps a chat of three turns as one session, answers its title while the first turn streams, and stores no task", async () => {
      const before = await sessionIds();
      const titles = sideCount("title");
      const chat = new OpenWebUiChat(setup);

      const first = await chat.start("How do I keep basil alive on a windowsill?");
      expect(first.response.headers.get("x-session-id")).toBe(chat.chatId);
      // Open WebUI asks for the title beside the first turn, on the same chat id.
      const title = await chat.task(TITLE_TEMPLATE, { max_completion_tokens: 1000 });
      const titleAnsweredAt = performance.now();
      const firstDone = await first.finished;
      expect(titleAnsweredAt).toBeLessThan(firstDone.at);
      await expectPassedThrough(title, "title");

      const tags = await chat.task(TAGS_TEMPLATE);
      await expectPassedThrough(tags, "tags");
      await expectPassedThrough(await chat.task(FOLLOW_UP_TEMPLATE), "follow_ups");

      await chat.turn("And in winter?");
      await expectPassedThrough(await chat.task(FOLLOW_UP_TEMPLATE), "follow_ups");
      const third = await chat.turn("Can I grow it from a cutting?");
      expect(third.headers.get("x-session-id")).toBe(chat.chatId);

      // The model saw the chat as Open WebUI sent it, and the session holds exactly its turns.
      const lastTurn = stack.fake
        .chatRequests()
        .filter((r) => r.body.stream)
        .at(-1)!;
      expect(transcript(lastTurn.body)).toEqual(transcript({ messages: [SYSTEM, ...chat.messages.slice(0, -1)] }));
      expect(await mainLine(chat.chatId)).toEqual(chat.messages);
      expect(await stack.memory.listBranches(chat.chatId)).toEqual([]);
      const after = await sessionIds();
      expect([...after].filter((id) => !before.has(id))).toEqual([chat.chatId]);
      expect(sideCount("title") - titles).toBe(1);
      const metrics = await (await stack.request("GET", "/metrics")).text();
      expect(metrics).toMatch(/^threadkeep_side_requests_total\{kind="follow_ups"\} \d+$/m);
    });

    it("passes tool selection through even though it carries no chat id", async () => {
      const before = await sessionIds();
      const chat = new OpenWebUiChat(setup);
      await chat.turn("What's the weather for my basil today?");
      const since = stack.fake.chatRequests().length;
      const sent = {
        model: MODEL,
        messages: toolSelectionMessages([{ name: "get_weather" }], chat.messages),
        stream: false,
      };
      const response = await stack.request("POST", "/v1/chat/completions", {
        body: sent,
        headers: chat.headers(undefined),
      });
      await expectPassedThrough({ response, sent, json: await response.json(), since }, "function_calling");
      expect([...(await sessionIds())].filter((id) => !before.has(id))).toEqual([chat.chatId]);
    });

    it("answers a temporary chat from the upstream alone and stores nothing", async () => {
      const before = await sessionIds();
      const temporaries = stack.server.metrics.temporaryRequests.get();
      const chat = new OpenWebUiChat(setup, "local:Xk3_pq9aAAAB");
      const first = await chat.turn("Is basil a perennial?");
      expect(first.status).toBe(200);
      expect(first.headers.get("x-session-id")).toBeNull();
      expect(first.headers.get("x-threadkeep-pass-through")).toBe("temporary");
      const second = await chat.turn("And rosemary?");
      expect(second.headers.get("x-session-id")).toBeNull();
      // The upstream got exactly the conversation Open WebUI sent, nothing added.
      const lastTurn = stack.fake
        .chatRequests()
        .filter((r) => r.body.stream)
        .at(-1)!;
      expect(lastTurn.body).toEqual({ model: MODEL, messages: [SYSTEM, ...chat.messages.slice(0, -1)], stream: true });
      expect(chat.messages.at(-1)?.content).toMatch(/^Answer to "And rosemary\?"/);
      expect(await sessionIds()).toEqual(before);
      expect(stack.server.metrics.temporaryRequests.get() - temporaries).toBe(2);
    });

    it("stores a retrieval turn (the RAG-rewritten message) as a turn, streamed with the whole history", async () => {
      const chat = new OpenWebUiChat(setup);
      await chat.turn("How do I keep basil alive on a windowsill?");
      // Open WebUI sends the rewritten message; its chat keeps the person's words.
      const words = "What does my notes file say about watering?";
      const rewritten = ragRendered(words, ragSource(1, "basil-notes.md", "Water when the top 2 cm of soil are dry."));
      const response = await stack.request("POST", "/v1/chat/completions", {
        body: {
          model: MODEL,
          messages: [SYSTEM, ...chat.messages, { role: "user", content: rewritten }],
          stream: true,
        },
        headers: chat.headers(),
      });
      expect(response.headers.get("x-session-id")).toBe(chat.chatId);
      expect(response.headers.get("x-threadkeep-pass-through")).toBeNull();
      chat.messages.push(
        { role: "user", content: words },
        { role: "assistant", content: streamedText(await response.text()) },
      );
      const upstream = stack.fake
        .chatRequests()
        .filter((r) => r.body.stream)
        .at(-1)!;
      expect(upstream.body.messages.at(-1).content).toBe(rewritten);
      expect((await mainLine(chat.chatId)).slice(0, 2)).toEqual(chat.messages.slice(0, 2));
      expect((await mainLine(chat.chatId)).at(-1)).toEqual(chat.messages.at(-1));
    });

    // A stored RAG-rewritten message and the person's words for it (ragQueryOf) are the same message.
    it("keeps the main line the chat's turns after a retrieval turn is followed by a normal one", async () => {
      const chat = new OpenWebUiChat(setup);
      await chat.turn("How do I keep basil alive on a windowsill?");
      const words = "What does my notes file say about watering?";
      const rewritten = ragRendered(words, ragSource(1, "basil-notes.md", "Water when the top 2 cm of soil are dry."));
      const response = await stack.request("POST", "/v1/chat/completions", {
        body: {
          model: MODEL,
          messages: [SYSTEM, ...chat.messages, { role: "user", content: rewritten }],
          stream: true,
        },
        headers: chat.headers(),
      });
      chat.messages.push(
        { role: "user", content: words },
        { role: "assistant", content: streamedText(await response.text()) },
      );
      await chat.turn("Thanks! And in winter?");
      expect(await stack.memory.listBranches(chat.chatId)).toEqual([]);
      const stored = await mainLine(chat.chatId);
      expect(stored).toHaveLength(chat.messages.length);
      expect(stored.slice(-2)).toEqual(chat.messages.slice(-2));
    });

    it("follows a regenerate and an edit, keeping what they replaced as branches", async () => {
      const chat = new OpenWebUiChat(setup);
      await chat.turn("How do I keep basil alive on a windowsill?");
      await chat.turn("And in winter?");
      const replaced = chat.messages.at(-1)!;
      await chat.regenerate();
      expect(await mainLine(chat.chatId)).toEqual(chat.messages);
      await chat.edit(1, "And in a cold, dark winter?");
      expect(await mainLine(chat.chatId)).toEqual(chat.messages);
      const branches = await stack.memory.listBranches(chat.chatId);
      expect(branches.map((b) => b.reason)).toEqual(["regenerate", "edit"]);
      expect(branches[0].messages.map((m) => m.content)).toEqual([replaced.content]);
    });

    it("reads a one-message request as a regenerate of the first answer or an edit of the first message", async () => {
      const chat = new OpenWebUiChat(setup);
      await chat.turn("How do I keep basil alive on a windowsill?");
      // Regenerate of the first answer: the request is the first question alone.
      const first = chat.messages.at(-1)!;
      await chat.regenerate();
      expect(await mainLine(chat.chatId)).toEqual(chat.messages);
      await chat.turn("And in winter?");
      // Edit of the first message: one new user message; the whole line before it becomes a branch.
      const before = await mainLine(chat.chatId);
      await chat.edit(0, "How do I keep mint alive on a windowsill?");
      expect(await mainLine(chat.chatId)).toEqual(chat.messages);
      const sent = stack.fake
        .chatRequests()
        .filter((r) => r.body.stream)
        .at(-1)!.body.messages;
      expect(sent.filter((m: Msg) => m.role !== "system")).toEqual([
        { role: "user", content: "How do I keep mint alive on a windowsill?" },
      ]);
      const branches = await stack.memory.listBranches(chat.chatId);
      expect(branches.map((b) => b.reason)).toEqual(["regenerate", "edit"]);
      expect(branches[0].messages.map((m) => m.content)).toEqual([first.content]);
      expect(branches[1].messages.map((m) => ({ role: m.role, content: m.content }))).toEqual(before);
    });
  });
}

describe("Open WebUI with a custom header X-Threadkeep-Task: {{TASK}}", () => {
  it("passes a task through by the name Open WebUI puts in {{TASK}}, even from a customised template, and keeps turns (empty {{TASK}})", async () => {
    const chatId = randomUUID();
    const headers = (task: string) =>
      customHeaders({ "X-Session-ID": "{{CHAT_ID}}", "X-Threadkeep-Task": "{{TASK}}" }, { chatId, task });
    const turn = await stack.request("POST", "/v1/chat/completions", {
      body: { model: MODEL, messages: [{ role: "user", content: "Name three herbs for shade." }], stream: false },
      headers: headers(""),
    });
    expect(turn.headers.get("x-session-id")).toBe(chatId);
    // An admin's own title template: no default structure, so only the header tells.
    const since = stack.fake.chatRequests().length;
    const sent = {
      model: MODEL,
      messages: [{ role: "user", content: "Title this chat in three words: herbs for shade" }],
      stream: false,
    };
    const response = await stack.request("POST", "/v1/chat/completions", {
      body: sent,
      headers: headers("title_generation"),
    });
    await expectPassedThrough(
      { response, sent, json: await response.json(), since },
      "title",
      /^Answer to "Title this chat/,
    );
    expect((await mainLine(chatId)).map((m) => m.role)).toEqual(["user", "assistant"]);
  });
});
