/**
 * The session-header rules at the HTTP level, where the front-end tests do not reach: a configured
 * header order (`sessionHeaders` of createServer), a front-end id that is not a UUID, and
 * `/v1/responses` reading the same headers, passing temporary chats and side requests through.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FRONT_END_ID_NAMESPACE } from "../../src/server/front-ends/index.js";
import { uuidV5 } from "../../src/server/front-ends/session-headers.js";
import { renderTask, TITLE_TEMPLATE } from "../_front-ends.js";
import { type Stack, startStack } from "./_stack.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ sessionHeaders: ["X-Chat", "x-session-id"] });
});
afterAll(() => stack?.close());

const chat = (headers: Record<string, string>, content = "hi") =>
  stack.request("POST", "/v1/chat/completions", {
    body: { model: "fake-model", messages: [{ role: "user", content }] },
    headers,
  });
const respond = (headers: Record<string, string>, body: Record<string, unknown>) =>
  stack.request("POST", "/v1/responses", { body: { model: "fake-model", ...body }, headers });

describe("session headers", () => {
  it("reads the configured headers in their order and ignores the ones left out", async () => {
    const chatId = randomUUID();
    const own = randomUUID();
    expect((await chat({ "X-Chat": chatId, "X-Session-ID": own })).headers.get("x-session-id")).toBe(chatId);
    expect((await chat({ "X-Chat": "", "X-Session-ID": own })).headers.get("x-session-id")).toBe(own);
    const fresh = (await chat({ "X-OpenWebUI-Chat-Id": chatId })).headers.get("x-session-id");
    expect(fresh).not.toBe(chatId);
  });

  it("maps a front-end id that is not a UUID to the same UUID v5 every time, and stores under it", async () => {
    const first = await chat({ "X-Chat": "chat-42" }, "one");
    const id = uuidV5("chat-42", FRONT_END_ID_NAMESPACE);
    expect(first.headers.get("x-session-id")).toBe(id);
    await chat({ "X-Chat": "chat-42" }, "two");
    expect((await stack.memory.getMessages(id)).map((m) => m.content)).toEqual([
      "one",
      "echo: one",
      "two",
      "echo: two",
    ]);
  });
});

describe("/v1/responses", () => {
  it("continues the session the headers name when the request names no conversation", async () => {
    const chatId = randomUUID();
    const first = await respond({ "X-Chat": chatId }, { input: "remember: basil" });
    expect(first.status).toBe(200);
    expect(first.headers.get("x-session-id")).toBe(chatId);
    await respond({ "X-Chat": chatId }, { input: "what did I ask?" });
    const last = stack.fake.chatRequests().at(-1)!;
    expect(last.body.messages.map((m: { content: string }) => m.content)).toEqual([
      "remember: basil",
      "echo: remember: basil",
      "what did I ask?",
    ]);
  });

  it("answers a temporary chat and a task without a session", async () => {
    const before = (await stack.memory.listSessions({ limit: 1000 })).sessions.length;
    const temporary = await respond({ "X-Chat": "local:abc" }, { input: "just this once", instructions: "Be brief." });
    expect(temporary.status).toBe(200);
    expect(temporary.headers.get("x-threadkeep-pass-through")).toBe("temporary");
    expect(temporary.headers.get("x-session-id")).toBeNull();
    const response = (await temporary.json()) as any;
    expect(response.output[0].content[0].text).toBe("echo: just this once");
    expect(response.store).toBe(false);
    expect(stack.fake.chatRequests().at(-1)!.body.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "just this once" },
    ]);

    const prompt = renderTask(TITLE_TEMPLATE, [{ role: "user", content: "basil care" }]);
    const title = await respond({ "X-Chat": randomUUID() }, { input: prompt, stream: true });
    expect(title.headers.get("x-threadkeep-pass-through")).toBe("title");
    expect(await title.text()).toContain("response.completed");
    expect(stack.fake.chatRequests().at(-1)!.body.messages).toEqual([{ role: "user", content: prompt }]);
    expect((await stack.memory.listSessions({ limit: 1000 })).sessions.length).toBe(before);
  });
});
