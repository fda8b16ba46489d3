/**
 * Whole-history clients (OpenWebUI, the AI SDK's useChat): every turn sends the whole conversation,
 * and regenerate and edit send a different one. Driven with the official `openai` client against a
 * fake upstream that records what "the model" received.
 */
import type OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { SummarizeRequest } from "../../src/core/context/summarize.js";
import { createSummarizer } from "../../src/llm/summarizer.js";
import { type Stack, startStack } from "./_stack.js";

type Msg = { role: "system" | "user" | "assistant"; content: string };
const SYSTEM: Msg = { role: "system", content: "You are a helpful assistant." };
const SUMMARY_MODEL = "summary-model";

/** A client that keeps the conversation itself, as OpenWebUI and useChat do, and says so (`X-Threadkeep-Client`). */
class WholeHistoryClient {
  readonly id = newSessionId();
  messages: Msg[] = [];
  /** Sends `X-Threadkeep-Client: whole-history`. */
  declared = true;
  constructor(
    private readonly openai: OpenAI,
    private readonly stack: Stack,
  ) {}

  /** Sends the conversation and adds the answer; returns what the model received (without system messages). */
  async complete(): Promise<Msg[]> {
    const before = this.stack.fake.chatRequests().length;
    const completion = await this.openai.chat.completions.create(
      { model: "fake-model", messages: [SYSTEM, ...this.messages] },
      { headers: { "X-Session-ID": this.id, ...(this.declared ? { "X-Threadkeep-Client": "whole-history" } : {}) } },
    );
    const sent = this.stack.fake
      .chatRequests()
      .slice(before)
      .find((r) => r.body.model !== SUMMARY_MODEL)!.body.messages as Msg[];
    this.messages.push({ role: "assistant", content: completion.choices[0].message.content ?? "" });
    return sent;
  }
  send(text: string) {
    this.messages.push({ role: "user", content: text });
    return this.complete();
  }
  /** Drops the last answer and asks again. */
  regenerate() {
    this.messages.pop();
    return this.complete();
  }
  /** Replaces the `nth` user message (0-based) and drops what followed it. */
  edit(nth: number, text: string) {
    const at = this.messages.map((m, i) => [m, i] as const).filter(([m]) => m.role === "user")[nth][1];
    this.messages = [...this.messages.slice(0, at), { role: "user", content: text }];
    return this.complete();
  }
}

const plain = (messages: { role: string; content: unknown }[]) =>
  messages.filter((m) => m.role !== "system").map((m) => ({ role: m.role, content: m.content }));

describe("whole-history clients", () => {
  let stack: Stack;
  afterEach(() => stack?.close());

  async function start(capped: boolean) {
    // The summarizer talks to the same fake, under its own model name.
    const summarizer = {
      summarize: (request: SummarizeRequest) =>
        createSummarizer({ baseUrl: stack.fake.url, model: SUMMARY_MODEL }).summarize(request),
    };
    stack = await startStack(
      capped ? { memoryOptions: { maxMessages: 10, window: 6, compaction: { threshold: 6 }, summarizer } } : {},
    );
    let answers = 0;
    stack.fake.setReply((body) => {
      if (body.model === SUMMARY_MODEL) return { content: "Summary: the user talked about pets." };
      const last = [...body.messages].reverse().find((m: Msg) => m.role === "user");
      return { content: `answer ${++answers} to "${last?.content}"` };
    });
    return new WholeHistoryClient(stack.client(), stack);
  }

  /** The model saw the client's conversation (its tail, where the window and summaries apply). */
  function expectModelSaw(sent: Msg[], client: WholeHistoryClient, capped: boolean) {
    const conversation = client.messages.slice(0, -1);
    const seen = plain(sent);
    if (!capped) expect(seen).toEqual(conversation);
    else {
      expect(seen.length).toBeGreaterThan(0);
      expect(seen).toEqual(conversation.slice(-seen.length));
    }
  }

  async function expectStoredMainLine(client: WholeHistoryClient, capped: boolean) {
    const stored = plain(await stack.memory.getMessages(client.id, { userId: "default" }));
    if (!capped) expect(stored).toEqual(client.messages);
    else expect(stored).toEqual(client.messages.slice(-stored.length));
  }

  for (const capped of [false, true]) {
    it(`keeps the main line once and every superseded answer as a branch${capped ? " (capped at 10, summarised)" : ""}`, async () => {
      const client = await start(capped);
      const turns = capped
        ? ["I have a cat.", "She is grey.", "She likes fish.", "And naps.", "Name ideas?", "Shorter ones?"]
        : ["I have a cat.", "Name ideas?"];
      for (const text of turns) {
        expectModelSaw(await client.send(text), client, capped);
        await expectStoredMainLine(client, capped);
      }

      // Regenerate twice: the model never sees the old answers; both are kept.
      const original = client.messages.at(-1)!.content;
      expectModelSaw(await client.regenerate(), client, capped);
      const second = client.messages.at(-1)!.content;
      expectModelSaw(await client.regenerate(), client, capped);
      await expectStoredMainLine(client, capped);
      let branches = await stack.memory.listBranches(client.id);
      expect(branches.map((b) => [b.reason, plain(b.messages).map((m) => m.content)])).toEqual([
        ["regenerate", [original]],
        ["regenerate", [second]],
      ]);

      // Continue, then edit the last user message, and continue again.
      expectModelSaw(await client.send("Thanks!"), client, capped);
      expectModelSaw(await client.edit(turns.length, "Thanks, and a dog name?"), client, capped);
      await expectStoredMainLine(client, capped);
      expectModelSaw(await client.send("Great."), client, capped);
      branches = await stack.memory.listBranches(client.id);
      expect(branches.at(-1)).toMatchObject({ reason: "edit" });
      expect(plain(branches.at(-1)!.messages)[0].content).toBe("Thanks!");

      // Edit the first user message: the whole conversation changes.
      const beforeEdit = plain(await stack.memory.getMessages(client.id, { userId: "default" }));
      const clientBeforeEdit = [...client.messages];
      if (capped) {
        // The old part is capped away and summarised; the edit goes before what the store still holds.
        expect((await stack.memory.getMessages(client.id, { userId: "default" }))[0].seq).toBeGreaterThan(1);
        expect((await stack.memory.listSummaries(client.id)).length).toBeGreaterThan(0);
      }
      const sent = await client.edit(0, "I have a dog.");
      expect(plain(sent)).toEqual([{ role: "user", content: "I have a dog." }]);
      // No summary of the superseded conversation reaches the model.
      expect(sent.filter((m) => m.role === "system")).toEqual([SYSTEM]);
      await expectStoredMainLine(client, capped);
      expectModelSaw(await client.send("He is brown."), client, capped);
      await expectStoredMainLine(client, capped);
      const editFirst = (await stack.memory.listBranches(client.id)).at(-1)!;
      expect(editFirst.reason).toBe("edit");
      expect(plain(editFirst.messages)).toEqual(beforeEdit);

      // Every answer the user saw is kept: on the main line or in a branch.
      const kept = [
        ...plain(await stack.memory.getMessages(client.id, { userId: "default" })),
        ...(await stack.memory.listBranches(client.id)).flatMap((b) => plain(b.messages)),
      ].map((m) => m.content);
      if (!capped)
        for (const n of [1, 2, 3, 4, 5, 6, 7, 8])
          expect(kept.some((c) => String(c).startsWith(`answer ${n} `))).toBe(true);

      // Switch back (ChatGPT's "< 1/2 >"): the conversation before the first-message edit returns.
      const response = await stack.request("POST", `/v1/sessions/${client.id}/branches/${editFirst.id}/switch`);
      expect(response.status).toBe(200);
      expect(plain(await stack.memory.getMessages(client.id, { userId: "default" }))).toEqual(beforeEdit);
      const dogLine = (await stack.memory.getBranch(client.id, editFirst.id)).messages;
      expect(plain(dogLine).map((m) => m.content)).toEqual([
        "I have a dog.",
        expect.stringContaining("I have a dog."),
        "He is brown.",
        expect.stringContaining("He is brown."),
      ]);

      // A client that shows the restored line (it kept it as its own branch) continues it.
      client.messages = clientBeforeEdit;
      expectModelSaw(await client.send("One more?"), client, capped);
      await expectStoredMainLine(client, capped);
    });
  }

  it("reconciles streamed turns the same way", async () => {
    const client = await start(false);
    const openai = stack.client();
    const history: Msg[] = [{ role: "user", content: "Suggest a cat name." }];
    const stream = async () => {
      let text = "";
      const chunks = await openai.chat.completions.create(
        { model: "fake-model", messages: [SYSTEM, ...history], stream: true },
        { headers: { "X-Session-ID": client.id } },
      );
      for await (const chunk of chunks) text += chunk.choices[0]?.delta?.content ?? "";
      return text;
    };
    history.push({ role: "assistant", content: await stream() });
    history.push({ role: "user", content: "Shorter?" });
    const first = await stream();
    // Regenerate: the same history again, without the answer.
    const second = await stream();
    expect(plain(stack.fake.chatRequests().at(-1)!.body.messages)).toEqual(history);
    expect(plain(await stack.memory.getMessages(client.id, { userId: "default" }))).toEqual([
      ...history,
      { role: "assistant", content: second },
    ]);
    expect((await stack.memory.listBranches(client.id)).map((b) => [b.reason, plain(b.messages)])).toEqual([
      ["regenerate", [{ role: "assistant", content: first }]],
    ]);
  });

  it("without the declaration, appends an edit of the first message instead of hiding the conversation", async () => {
    const client = await start(false);
    client.declared = false;
    await client.send("I have a cat.");
    await client.send("Name ideas?");
    // A later edit is told by the stored line it reproduces: two messages from the start, then a change.
    await client.edit(1, "Names for a grey cat?");
    expect((await stack.memory.listBranches(client.id)).map((b) => b.reason)).toEqual(["edit"]);
    // A lone new first message cannot be told from a thin turn: it is appended, nothing is hidden.
    const sent = await client.edit(0, "I have a dog.");
    expect(plain(sent).map((m) => m.content)).toEqual([
      "I have a cat.",
      'answer 1 to "I have a cat."',
      "Names for a grey cat?",
      'answer 3 to "Names for a grey cat?"',
      "I have a dog.",
    ]);
    expect(await stack.memory.listBranches(client.id)).toHaveLength(1);
  });

  it("leaves thin clients as they were: one new message per request is appended", async () => {
    const client = await start(false);
    const openai = stack.client();
    for (const text of ["first", "first"]) {
      await openai.chat.completions.create(
        { model: "fake-model", messages: [{ role: "user", content: text }] },
        { headers: { "X-Session-ID": client.id } },
      );
    }
    expect(plain(await stack.memory.getMessages(client.id, { userId: "default" })).map((m) => m.content)).toEqual([
      "first",
      'answer 1 to "first"',
      "first",
      'answer 2 to "first"',
    ]);
    expect(await stack.memory.listBranches(client.id)).toEqual([]);
  });

  it("reads a Responses request on a named session without its system items (the AI SDK puts `system` in `input`)", async () => {
    const client = await start(false);
    const headers = { "X-Session-ID": client.id };
    for (const q of ["q1", "q2", "q1"]) {
      const input = [
        { role: "system", content: "Be terse." },
        { role: "user", content: q },
      ];
      expect(
        (await stack.request("POST", "/v1/responses", { body: { model: "fake-model", input }, headers })).status,
      ).toBe(200);
    }
    const sent = stack.fake.chatRequests().at(-1)!.body.messages;
    expect(sent[0]).toEqual({ role: "system", content: "Be terse." });
    expect(plain(sent).map((m) => m.content)).toEqual(["q1", 'answer 1 to "q1"', "q2", 'answer 2 to "q2"', "q1"]);
    // Nothing was read as a regenerate, and the system item is sent each time, never stored.
    expect(await stack.memory.listBranches(client.id)).toEqual([]);
    expect((await stack.memory.getMessages(client.id, { userId: "default" })).map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "user",
      "assistant",
      "user",
      "assistant",
    ]);
  });

  it("leaves a thin client that re-sends the tool call it answers as it was", async () => {
    const client = await start(false);
    const call = { id: "call_1", type: "function" as const, function: { name: "lookup", arguments: "{}" } };
    stack.fake.setReply((_body, index) => (index === 0 ? { tool_calls: [call] } : { content: "Found it." }));
    const openai = stack.client();
    const headers = { headers: { "X-Session-ID": client.id } };
    const first = await openai.chat.completions.create(
      { model: "fake-model", messages: [{ role: "user", content: "Look it up" }] },
      headers,
    );
    await openai.chat.completions.create(
      {
        model: "fake-model",
        messages: [first.choices[0].message, { role: "tool", tool_call_id: "call_1", content: "42" }],
      },
      headers,
    );
    const stored = await stack.memory.getMessages(client.id, { userId: "default" });
    expect(stored.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(plain(stack.fake.chatRequests().at(-1)!.body.messages).map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
    ]);
    expect(await stack.memory.listBranches(client.id)).toEqual([]);
  });

  it("lists, reads and switches branches over HTTP, and refuses other owners and bad ids", async () => {
    const client = await start(false);
    await client.send("Suggest a cat name.");
    await client.send("Another?");
    await client.regenerate();
    const list: any = await (await stack.request("GET", `/v1/sessions/${client.id}/branches`)).json();
    expect(list.data).toEqual([
      expect.objectContaining({ id: 1, atSeq: 3, parentId: null, reason: "regenerate", messageCount: 1 }),
    ]);
    const one: any = await (await stack.request("GET", `/v1/sessions/${client.id}/branches/1`)).json();
    expect(one.messages[0]).toMatchObject({ role: "assistant", seq: 4 });
    expect((await stack.request("GET", `/v1/sessions/${client.id}/branches/9`)).status).toBe(404);
    expect((await stack.request("GET", `/v1/sessions/${client.id}/branches/x`)).status).toBe(400);
    expect((await stack.request("POST", `/v1/sessions/${newSessionId()}/branches/1/switch`)).status).toBe(404);
    const switched: any = await (await stack.request("POST", `/v1/sessions/${client.id}/branches/1/switch`)).json();
    expect(switched.messages.map((m: Msg) => m.content)).toEqual([one.messages[0].content]);
    expect(switched.branch).toMatchObject({ id: 1, messageCount: 1 });
  });
});
