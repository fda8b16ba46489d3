/**
 * The Conversations and models APIs with the official `openai` client; a conversation is a
 * threadkeep session, seen through /v1/sessions too.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Stack, startStack, transcript } from "./_stack.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ model: "fake-model" });
});
afterAll(() => stack.close());

const sessionOf = (conversationId: string) => {
  const hex = conversationId.slice(5);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
};

describe("Conversations API", () => {
  it("creates a conversation with items and metadata, pages its items both ways, and answers in it", async () => {
    const client = stack.client();
    const conversation = await client.conversations.create({
      metadata: { topic: "cats" },
      items: [
        { role: "system", content: "You like cats." },
        { role: "user", content: "one" },
        { role: "assistant", content: "two" },
        { role: "user", content: "three" },
        { role: "assistant", content: "four" },
      ],
    });
    expect(conversation).toMatchObject({ object: "conversation", metadata: { topic: "cats" } });
    expect(conversation.id).toMatch(/^conv_[0-9a-f]{32}$/);
    expect(typeof conversation.created_at).toBe("number");

    const texts = (items: any[]) => items.map((i) => i.content[0].text);
    const desc = await client.conversations.items.list(conversation.id);
    expect(texts(desc.data)).toEqual(["four", "three", "two", "one", "You like cats."]);
    const ascPage = await client.conversations.items.list(conversation.id, { order: "asc", limit: 2 });
    expect(texts(ascPage.data)).toEqual(["You like cats.", "one"]);
    expect(ascPage.has_more).toBe(true);
    const raw = (await (
      await stack.request("GET", `/v1/conversations/${conversation.id}/items?order=asc&limit=2`)
    ).json()) as any;
    expect(raw).toEqual({
      object: "list",
      data: ascPage.data,
      first_id: ascPage.data[0].id,
      last_id: ascPage.data[1].id,
      has_more: true,
    });
    const all: any[] = [];
    for await (const item of client.conversations.items.list(conversation.id, { order: "asc", limit: 2 }))
      all.push(item);
    expect(texts(all)).toEqual(["You like cats.", "one", "two", "three", "four"]);
    const after = await client.conversations.items.list(conversation.id, {
      order: "desc",
      limit: 2,
      after: desc.data[1].id,
    });
    expect(texts(after.data)).toEqual(["two", "one"]);
    // Item ids are stable: the same on every read.
    expect((await client.conversations.items.list(conversation.id)).data.map((i) => i.id)).toEqual(
      desc.data.map((i) => i.id),
    );

    const response = await client.responses.create({
      model: "fake-model",
      input: "five",
      conversation: conversation.id,
    });
    expect(response.conversation).toEqual({ id: conversation.id });
    expect(transcript(stack.fake.chatRequests().at(-1)!.body)).toEqual([
      "system: You like cats.",
      "user: one",
      "assistant: two",
      "user: three",
      "assistant: four",
      "user: five",
    ]);
    const latest = await client.conversations.items.list(conversation.id, { limit: 2 });
    expect(texts(latest.data)).toEqual(["echo: five", "five"]);
    await client.responses.create({
      model: "fake-model",
      input: [{ role: "user", content: "six" }],
      conversation: { id: conversation.id },
    });
    expect(transcript(stack.fake.chatRequests().at(-1)!.body).slice(-3)).toEqual([
      "user: five",
      "assistant: echo: five",
      "user: six",
    ]);
  });

  it("is a threadkeep session: the same messages through /v1/sessions, and chat turns read as items", async () => {
    const client = stack.client();
    const conversation = await client.conversations.create({
      items: [{ role: "user", content: "from the conversation" }],
    });
    const sessionId = sessionOf(conversation.id);
    const messages = (await (await stack.request("GET", `/v1/sessions/${sessionId}/messages`)).json()) as any;
    expect(messages.data.map((m: any) => [m.role, m.content])).toEqual([["user", "from the conversation"]]);
    // A chat completions turn in the same session shows up as items.
    await client.chat.completions.create(
      { model: "fake-model", messages: [{ role: "user", content: "from chat" }] },
      { headers: { "X-Session-ID": sessionId } },
    );
    const items = await client.conversations.items.list(conversation.id, { order: "asc" });
    expect(items.data.map((i: any) => [i.role, i.content[0].text])).toEqual([
      ["user", "from the conversation"],
      ["user", "from chat"],
      ["assistant", "echo: from chat"],
    ]);
    // And a plain session id names the conversation too.
    const response = await client.responses.create({
      model: "fake-model",
      input: "via the session id",
      conversation: sessionId,
    });
    expect(response.conversation).toEqual({ id: conversation.id });
  });

  it("retrieves, updates and deletes a conversation; adds, gets and deletes items", async () => {
    const client = stack.client();
    const conversation = await client.conversations.create();
    expect(conversation.metadata).toEqual({});
    const added = await client.conversations.items.create(conversation.id, {
      items: [
        { role: "user", content: "call it" },
        { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
        { type: "function_call", call_id: "c2", name: "g", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: "one" },
        { type: "function_call_output", call_id: "c2", output: "two" },
      ],
    });
    expect(added.object).toBe("list");
    expect(added.data.map((i) => i.type)).toEqual([
      "message",
      "function_call",
      "function_call",
      "function_call_output",
      "function_call_output",
    ]);
    const call = added.data[2] as { id: string };
    expect(await client.conversations.items.retrieve(call.id, { conversation_id: conversation.id })).toEqual(call);

    const afterDelete = await client.conversations.items.delete(call.id, { conversation_id: conversation.id });
    expect(afterDelete.id).toBe(conversation.id);
    const left = await client.conversations.items.list(conversation.id, { order: "asc" });
    expect(left.data.map((i) => i.id)).toEqual([
      added.data[0].id,
      added.data[1].id,
      added.data[3].id,
      added.data[4].id,
    ]);
    await expect(
      client.conversations.items.retrieve(call.id, { conversation_id: conversation.id }),
    ).rejects.toMatchObject({ status: 404 });

    const updated = await client.conversations.update(conversation.id, { metadata: { title: "renamed" } });
    expect(updated.metadata).toEqual({ title: "renamed" });
    expect((await client.conversations.retrieve(conversation.id)).metadata).toEqual({ title: "renamed" });
    expect(await client.conversations.delete(conversation.id)).toEqual({
      id: conversation.id,
      object: "conversation.deleted",
      deleted: true,
    });
    await expect(client.conversations.retrieve(conversation.id)).rejects.toMatchObject({ status: 404 });
  });

  it("with openai-python's habit (Content-Type: application/json on every request), deletes a response, an item and a conversation", async () => {
    // openai-python's BaseClient.default_headers put the JSON content type on every request and only
    // GET drops it; the official Node client, told the same, sends it on its bodyless DELETEs too.
    const client = new OpenAI({
      baseURL: `${stack.url}/v1`,
      apiKey: "sk-client-unused",
      maxRetries: 0,
      defaultHeaders: { "Content-Type": "application/json" },
    });
    const sent: string[] = [];
    const watched = client.withOptions({
      fetch: async (url, init) => {
        sent.push(
          `${init?.method} ${new Headers(init?.headers).get("content-type")} ${init?.body === undefined || init?.body === null ? "no body" : "body"}`,
        );
        return fetch(url, init);
      },
    });
    const conversation = await watched.conversations.create({
      items: [
        { role: "user", content: "one" },
        { role: "user", content: "two" },
      ],
    });
    const response = await watched.responses.create({
      model: "fake-model",
      input: "three",
      conversation: conversation.id,
    });
    expect(await watched.responses.delete(response.id)).toMatchObject({ id: response.id, deleted: true });
    await expect(watched.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
    const [first] = (await watched.conversations.items.list(conversation.id, { order: "asc" })).data;
    expect((await watched.conversations.items.delete(first!.id!, { conversation_id: conversation.id })).id).toBe(
      conversation.id,
    );
    expect(await watched.conversations.delete(conversation.id)).toEqual({
      id: conversation.id,
      object: "conversation.deleted",
      deleted: true,
    });
    await expect(watched.conversations.retrieve(conversation.id)).rejects.toMatchObject({ status: 404 });
    // The habit was on the wire: every DELETE carried the JSON content type and no body.
    const deletes = sent.filter((line) => line.startsWith("DELETE"));
    expect(deletes).toEqual(Array(3).fill("DELETE application/json no body"));
  });

  it("on SQLite too: an item deleted mid-conversation, a response chain continued after it", async () => {
    const sqlite = await startStack({ store: `sqlite:${join(mkdtempSync(join(tmpdir(), "tk-conv-")), "t.db")}` });
    try {
      const client = sqlite.client();
      const conversation = await client.conversations.create({
        items: [
          { role: "user", content: "a" },
          { role: "assistant", content: "b" },
          { role: "user", content: "c" },
        ],
      });
      const first = await client.responses.create({ model: "fake-model", input: "d", conversation: conversation.id });
      const before = await client.conversations.items.list(conversation.id, { order: "asc" });
      await client.conversations.items.delete(before.data[1].id!, { conversation_id: conversation.id });
      const after = await client.conversations.items.list(conversation.id, { order: "asc" });
      expect(after.data.map((i) => i.id)).toEqual(before.data.filter((_, i) => i !== 1).map((i) => i.id));
      expect((await client.responses.retrieve(first.id)).output_text).toBe("echo: d");
      await client.responses.create({ model: "fake-model", input: "e", previous_response_id: first.id });
      expect(transcript(sqlite.fake.chatRequests().at(-1)!.body)).toEqual([
        "user: a",
        "user: c",
        "user: d",
        "assistant: echo: d",
        "user: e",
      ]);
    } finally {
      await sqlite.close();
    }
  });

  it("refuses bad input with a 400 naming the field", async () => {
    const cases: [string, string, unknown, string][] = [
      ["POST", "/v1/conversations", { items: [{ role: "nobody", content: "x" }] }, "items[0].role"],
      ["POST", "/v1/conversations", { metadata: { a: 1 } }, "metadata.a"],
      ["POST", "/v1/conversations/conv_zzz", { metadata: {} }, "conversation"],
    ];
    for (const [method, path, body, param] of cases) {
      const res = await stack.request(method, path, { body });
      const error = ((await res.json()) as any).error;
      if (param === "conversation") {
        expect(res.status).toBe(404);
        continue;
      }
      expect(res.status, path).toBe(400);
      expect(error).toMatchObject({ code: "invalid_request", param });
    }
    const conversation = await stack.client().conversations.create();
    const list = await stack.request("GET", `/v1/conversations/${conversation.id}/items?limit=0`);
    expect(list.status).toBe(400);
    const empty = await stack.request("POST", `/v1/conversations/${conversation.id}/items`, { body: { items: [] } });
    expect(empty.status).toBe(400);
  });
});

describe("models", () => {
  it("lists and retrieves the upstream's models", async () => {
    const client = stack.client();
    const models = [];
    for await (const model of client.models.list()) models.push(model.id);
    expect(models).toEqual(["fake-model", "fake/large"]);
    expect(await client.models.retrieve("fake/large")).toMatchObject({
      id: "fake/large",
      object: "model",
      owned_by: "fake",
    });
    await expect(client.models.retrieve("nope")).rejects.toMatchObject({ status: 404 });
  });

  it("says so clearly when the upstream has no /models route", async () => {
    const bare = await startStack();
    try {
      bare.fake.setModels(null);
      const res = await bare.request("GET", "/v1/models");
      expect(res.status).toBe(502);
      expect(((await res.json()) as any).error.message).toMatch(/no \/models route/);
    } finally {
      await bare.close();
    }
  });

  it("is behind threadkeep's auth", async () => {
    const locked = await startStack({ apiKeys: { "sk-good": "alice" } });
    try {
      await expect(locked.client("sk-bad").models.list()).rejects.toMatchObject({ status: 401 });
      expect((await locked.client("sk-good").models.list()).data.length).toBe(2);
    } finally {
      await locked.close();
    }
  });
});
