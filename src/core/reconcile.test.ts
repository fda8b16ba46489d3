import { describe, expect, it } from "vitest";
import {
  HISTORY_META_KEY,
  readRequest,
  type ReadRequestOptions,
  sameMessage,
  type StoredView,
  viewFromWindow,
} from "./reconcile.js";
import type { ChatMessage, Message, Session } from "./types.js";

const u = (content: string): ChatMessage => ({ role: "user", content });
const a = (content: string): ChatMessage => ({ role: "assistant", content });
const call = (id: string, name = "lookup"): ChatMessage => ({
  role: "assistant",
  content: null,
  tool_calls: [{ id, type: "function", function: { name, arguments: "{}" } }],
});
const result = (id: string, content = "42"): ChatMessage => ({ role: "tool", tool_call_id: id, content });
/** Stored as the proxy stores a turn: the model's replies record their model. */
const stored = (messages: ChatMessage[], firstSeq = 1): Message[] =>
  messages.map((m, i) => ({
    ...m,
    seq: firstSeq + i,
    createdAt: 0,
    ...(m.role === "assistant" ? { metadata: { model: "m" } } : {}),
  }));
/** The whole line read. */
const full = (messages: Message[]): Required<StoredView> => ({
  first: messages[0],
  last: messages.at(-1)!,
  range: messages,
  tail: messages,
});
/** Only the newest `k` messages known (a window that did not reach the start). */
const windowOf = (messages: Message[], k: number): StoredView => ({ last: messages.at(-1), tail: messages.slice(-k) });

describe("readRequest", () => {
  const line = stored([u("q1"), a("a1"), u("q2"), a("a2")]);

  it("adopts a new session's conversation", () => {
    expect(readRequest([u("q1"), a("a1"), u("q2")], { tail: [] })).toMatchObject({
      reading: "new",
      toStore: [u("q1"), a("a1"), u("q2")],
    });
  });

  it("appends what follows a re-sent stored line", () => {
    const plan = readRequest([u("q1"), a("a1"), u("q2"), a("a2"), u("q3")], full(line))!;
    expect(plan).toMatchObject({ reading: "continue", toStore: [u("q3")], historyStartsAt: 1 });
    expect(plan.replaceAfter).toBeUndefined();
    expect(plan.metadata).toBeUndefined();
  });

  it("appends a thin turn, without reading more than the window", () => {
    expect(readRequest([u("q3")], full(line))).toMatchObject({ reading: "thin", toStore: [u("q3")] });
    expect(readRequest([u("q3")], windowOf(line, 2))).toMatchObject({ reading: "thin", toStore: [u("q3")] });
  });

  it("appends a tool loop's follow-up in any turn, single or parallel calls", () => {
    const turn1 = stored([u("weather?"), call("c1")]);
    expect(readRequest([u("weather?"), call("c1"), result("c1")], full(turn1))).toMatchObject({
      reading: "continue",
      toStore: [result("c1")],
    });
    // Turn 2: the thin client sends only its own turn; the first turn stays on the line.
    const turn2 = stored([u("weather?"), call("c1"), result("c1"), a("sunny"), u("and in Oslo and Rome?"), call("c2")]);
    const parallel: ChatMessage = {
      role: "assistant",
      content: null,
      tool_calls: [...call("c2").tool_calls!, ...call("c3").tool_calls!],
    };
    const turn2b = stored([u("weather?"), call("c1"), result("c1"), a("sunny"), u("and in Oslo and Rome?"), parallel]);
    for (const view of [full(turn2b), windowOf(turn2b, 4)]) {
      const plan = readRequest([u("and in Oslo and Rome?"), parallel, result("c2"), result("c3")], view)!;
      expect(plan).toMatchObject({ reading: "overlap", toStore: [result("c2"), result("c3")] });
      expect(plan.replaceAfter).toBeUndefined();
    }
    // The same question asked again, answered by the same call: still the newest turn's follow-up.
    const again = stored([u("weather?"), call("c1"), result("c1"), a("sunny"), u("weather?"), call("c9")]);
    expect(readRequest([u("weather?"), call("c9"), result("c9", "rain")], full(again))).toMatchObject({
      reading: "overlap",
      toStore: [result("c9", "rain")],
    });
    expect(readRequest([call("c2"), result("c2")], full(turn2))).toMatchObject({
      reading: "overlap",
      toStore: [result("c2")],
    });
  });

  it("regenerates and edits when the request reproduces the line from its start", () => {
    expect(readRequest([u("q1"), a("a1"), u("q2")], full(line))).toMatchObject({
      reading: "regenerate",
      replaceAfter: 3,
      branch: { reason: "regenerate" },
      toStore: [],
      upToSeq: 3,
    });
    expect(readRequest([u("q1"), a("a1"), u("q2 edited")], full(line))).toMatchObject({
      reading: "edit",
      replaceAfter: 2,
      toStore: [u("q2 edited")],
      upToSeq: 2,
    });
    // A window that does not reach the start asks for the line to be read.
    expect(readRequest([u("q1"), a("a1"), u("q2")], windowOf(line, 1))).toBeUndefined();
  });

  it("tells a lone message apart: thin turn, regenerate of the first answer, edit of the first message", () => {
    const oneTurn = stored([u("q1"), call("c1"), result("c1"), a("a1")]);
    // The same message again is a thin turn: without evidence a lone message never replaces anything.
    expect(readRequest([u("q1")], full(oneTurn))).toMatchObject({ reading: "thin", toStore: [u("q1")] });
    expect(readRequest([u("q1")], full(line))).toMatchObject({ reading: "thin", toStore: [u("q1")] });
    expect(readRequest([u("I have a dog.")], full(line))).toMatchObject({
      reading: "thin",
      toStore: [u("I have a dog.")],
    });
    // useChat's regenerate of the first answer and an edit of the first message, from a declared client.
    const declared: ReadRequestOptions = { client: "whole-history" };
    expect(readRequest([u("q1")], full(oneTurn), declared)).toMatchObject({
      reading: "regenerate",
      replaceAfter: 1,
      toStore: [],
    });
    expect(readRequest([u("I have a dog.")], full(line), declared)).toMatchObject({
      reading: "edit",
      replaceAfter: 0,
      toStore: [u("I have a dog.")],
    });
    // The legacy flag, once set by any tool loop, is no evidence.
    expect(
      readRequest([u("next")], full(line), { metadata: { [HISTORY_META_KEY]: { client: "whole-history" } } }),
    ).toMatchObject({ reading: "thin" });
  });

  it("matches tool-call arguments as JSON values", () => {
    const spaced: ChatMessage = {
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "c1", type: "function", function: { name: "lookup", arguments: '{ "city": "Rome", "days": 2 }' } },
      ],
    };
    const compact: ChatMessage = {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c1", type: "function", function: { name: "lookup", arguments: '{"days":2,"city":"Rome"}' } }],
    };
    expect(sameMessage(spaced, compact)).toBe(true);
    expect(
      sameMessage(spaced, {
        ...compact,
        tool_calls: [
          { ...compact.tool_calls![0], function: { name: "lookup", arguments: '{"city":"Oslo","days":2}' } },
        ],
      }),
    ).toBe(false);
  });

  it("takes no fixed preamble for evidence: a client's own assistant messages are not the model's answers", () => {
    // A thin client that starts every request with a few-shot exchange (its first request was adopted).
    const fewShot = [
      ...stored([u("example question"), a("example answer"), u("q1")]).map(({ metadata: _m, ...m }) => m),
      ...stored([a("a1")], 4),
    ];
    expect(readRequest([u("example question"), a("example answer"), u("q2")], full(fewShot))).toMatchObject({
      reading: "thin",
      toStore: [u("q2")],
    });
    // A request without an assistant message is never read against the line's start.
    expect(readRequest([u("context"), u("q1")], windowOf(line, 2))).toMatchObject({
      reading: "thin",
      toStore: [u("context"), u("q1")],
    });
  });

  it("follows an undeclared whole-history client that edits messages in place, on position-aligned evidence", () => {
    const kept = { ...a("a2"), metadata: { model: "m" } };
    // An answer corrected, the rest of the chat kept: the line from the correction is the client's.
    expect(readRequest([u("q1"), a("a1 fixed"), u("q2"), a("a2"), u("q3")], full(line))).toMatchObject({
      reading: "edit",
      replaceAfter: 1,
      branch: { reason: "edit" },
      upToSeq: 1,
      toStore: [a("a1 fixed"), u("q2"), kept, u("q3")],
    });
    // The first message edited; several at once.
    expect(readRequest([u("q1 fixed"), a("a1"), u("q2"), a("a2"), u("q3")], full(line))).toMatchObject({
      reading: "edit",
      replaceAfter: 0,
      upToSeq: 0,
    });
    expect(readRequest([u("q1 fixed"), a("a1"), u("q2 fixed"), a("a2"), u("q3")], full(line))).toMatchObject({
      reading: "edit",
      replaceAfter: 0,
      toStore: [u("q1 fixed"), { ...a("a1"), metadata: { model: "m" } }, u("q2 fixed"), kept, u("q3")],
    });
    // With tool calls in between.
    const tools = stored([u("q1"), call("c1"), result("c1"), a("a1"), u("q2"), a("a2")]);
    expect(
      readRequest([u("q1 fixed"), call("c1"), result("c1"), a("a1"), u("q2"), a("a2"), u("q3")], full(tools)),
    ).toMatchObject({ reading: "edit", replaceAfter: 0 });
  });

  it("takes no position-aligned evidence from a lone answer or from a thin client's re-sent turn", () => {
    // The one answer a one-turn chat has is not enough: a thin client's own history could hold it.
    expect(readRequest([u("q1 fixed"), a("a1"), u("q2")], full(stored([u("q1"), a("a1")])))).toMatchObject({
      reading: "thin",
      toStore: [u("q2")],
    });
    // A retried tool-loop follow-up whose call and result repeat the first turn's, at the first turn's positions.
    const repeated = stored([
      u("look"),
      call("c1"),
      result("c1"),
      a("done"),
      u("look again"),
      call("c1"),
      result("c1"),
      a("done again"),
    ]);
    expect(readRequest([u("look again"), call("c1"), result("c1")], full(repeated))).toMatchObject({
      reading: "thin",
      toStore: [],
    });
  });

  it("stores a retried tool-loop follow-up's results once", () => {
    const done = stored([u("q1"), a("a1"), u("look"), call("c1"), result("c1"), a("done")]);
    expect(readRequest([u("look"), call("c1"), result("c1")], full(done))).toMatchObject({
      reading: "thin",
      toStore: [],
    });
  });

  it("aligns a declared client that trims its own window from where its first messages stand", () => {
    const long = stored([u("q1"), a("a1"), u("q2"), a("a2"), u("q3"), a("a3")]);
    const declared: ReadRequestOptions = { client: "whole-history" };
    // Its last four messages and a new one.
    expect(readRequest([u("q2"), a("a2"), u("q3"), a("a3"), u("q4")], full(long), declared)).toMatchObject({
      reading: "continue",
      toStore: [u("q4")],
    });
    // A regenerate and an edit from inside the line replace nothing before where it begins.
    expect(readRequest([u("q2"), a("a2"), u("q3")], full(long), declared)).toMatchObject({
      reading: "regenerate",
      replaceAfter: 5,
      toStore: [],
    });
    expect(readRequest([u("q2"), a("a2"), u("q3 edited")], full(long), declared)).toMatchObject({
      reading: "edit",
      replaceAfter: 4,
      toStore: [u("q3 edited")],
    });
  });

  it("needs two compared messages before replacing: the cap's dropped messages are no evidence", () => {
    const capped = stored([u("q4"), a("a4"), u("q5"), a("a5")], 7);
    expect(readRequest([u("q1"), a("a1"), u("x")], full(capped))).toMatchObject({ reading: "thin", toStore: [u("x")] });
  });

  it("follows a declared client", () => {
    const declared: ReadRequestOptions = { client: "whole-history" };
    expect(readRequest([u("I have a dog.")], full(line), declared)).toMatchObject({ reading: "edit", replaceAfter: 0 });
    expect(readRequest([u("q1"), a("a1"), u("q2"), a("a2"), u("q3")], full(line), declared)).toMatchObject({
      reading: "continue",
      toStore: [u("q3")],
    });
    expect(readRequest([u("I have a dog.")], windowOf(line, 2), declared)).toBeUndefined();
    expect(readRequest([u("q1")], full(stored([u("q1"), a("a1")])), { client: "thin" })).toMatchObject({
      reading: "thin",
      toStore: [u("q1")],
    });
  });

  it("moves a declared client's start when an edit goes before what the store still holds", () => {
    const capped = stored([u("q4"), a("a4"), u("q5"), a("a5")], 7);
    const plan = readRequest([u("q1 edited")], full(capped), { client: "whole-history" })!;
    expect(plan).toMatchObject({
      replaceAfter: 6,
      upToSeq: 6,
      historyStartsAt: 7,
      branch: { reason: "edit", metadata: { historyStartsAt: 1 } },
    });
    expect(plan.metadata).toEqual({ [HISTORY_META_KEY]: { historyStartsAt: 7 } });
  });

  it("builds a view from the window", () => {
    const session = { id: "s", userId: "u", createdAt: 0, lastActivityAt: 0, metadata: {} } as Session;
    expect(viewFromWindow(line, true, session)).toMatchObject({ first: line[0], last: line[3], range: line });
    expect(viewFromWindow(line.slice(2), false, session).range).toBeUndefined();
  });

  it("compares role, text and tool calls, not metadata or whitespace", () => {
    const c = { id: "c1", type: "function", function: { name: "f", arguments: "{}" } };
    expect(sameMessage({ ...a(" hi \n"), metadata: { model: "m" } } as ChatMessage, a("hi"))).toBe(true);
    expect(
      sameMessage(
        { role: "assistant", content: null, tool_calls: [c] },
        { role: "assistant", content: "", tool_calls: [c] },
      ),
    ).toBe(true);
    expect(
      sameMessage(
        { role: "assistant", content: null, tool_calls: [c] },
        { role: "assistant", content: null, tool_calls: [{ ...c, function: { name: "f", arguments: '{"x":1}' } }] },
      ),
    ).toBe(false);
    expect(sameMessage(u("hi"), a("hi"))).toBe(false);
    expect(sameMessage(u("hi"), { role: "user", content: [{ type: "text", text: "hi" }] })).toBe(true);
  });
});
