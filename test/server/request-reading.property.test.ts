/**
 * The property behind request reading: whatever mix of thin turns, tool loops and whole-history
 * requests (with regenerates, edits and in-place edits of any message, declared or not) reaches one
 * session, no message the client still shows ever leaves the session's main line, nothing replaced is
 * lost (it is in a branch), and whenever a request carries a stored model answer and another stored
 * message at their positions, the model receives exactly the request's conversation. Random programs
 * of client steps, through the real server and the fake upstream (`THREADKEEP_PROPERTY_RUNS` sets how
 * many per window).
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { FakeReply } from "../_fake-upstream.js";
import { type Stack, startStack } from "./_stack.js";

type Msg = {
  role: "system" | "user" | "assistant" | "tool";
  content: string | null;
  tool_calls?: Call[];
  tool_call_id?: string;
};
type Call = { id: string; type: "function"; function: { name: string; arguments: string } };
const SYSTEM: Msg = { role: "system", content: "You are terse." };

/** One thing a client does. */
type Step =
  | { kind: "thin"; calls: number }
  | { kind: "whole"; calls: number; declared: boolean }
  | { kind: "regenerate"; declared: boolean }
  | { kind: "edit"; nth: number; declared: boolean }
  | { kind: "inplace"; nth: number; role: "user" | "assistant"; declared: boolean };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant("thin" as const), calls: fc.integer({ min: 0, max: 2 }) }),
  fc.record({ kind: fc.constant("whole" as const), calls: fc.integer({ min: 0, max: 2 }), declared: fc.boolean() }),
  fc.record({ kind: fc.constant("regenerate" as const), declared: fc.boolean() }),
  fc.record({ kind: fc.constant("edit" as const), nth: fc.nat({ max: 5 }), declared: fc.boolean() }),
  fc.record({
    kind: fc.constant("inplace" as const),
    nth: fc.nat({ max: 7 }),
    role: fc.constantFrom("user" as const, "assistant" as const),
    declared: fc.boolean(),
  }),
);

const RUNS = Number(process.env.THREADKEEP_PROPERTY_RUNS ?? 60);

/**
 * A program in which the model must see exactly the client's view: no undeclared rewrite (an
 * undeclared regenerate or edit may be appended, leaving the replaced messages in the model's view).
 */
const clean = (steps: Step[]) =>
  steps.every((s) => s.kind === "thin" || s.kind === "whole" || s.kind === "inplace" || s.declared);

type Stored = Msg & { seq: number; metadata?: Record<string, unknown> };

/**
 * The request's proof that it re-sends the whole conversation: at their own positions on the stored
 * line (message `i` is seq `i + 1`: no program moves the line's start), a stored model answer and
 * another stored message.
 */
function alignedEvidence(messages: Msg[], line: Stored[]): boolean {
  const bySeq = new Map(line.map((m) => [m.seq, m]));
  const reproduced = messages.flatMap((m, i) => {
    const mine = bySeq.get(i + 1);
    return mine && key(mine) === key(m) ? [mine] : [];
  });
  return (
    reproduced.length >= 2 && reproduced.some((m) => m.role === "assistant" && typeof m.metadata?.model === "string")
  );
}

/** What makes two messages the same to a person reading the chat. */
const key = (m: Msg) =>
  JSON.stringify([
    m.role,
    m.content ?? "",
    (m.tool_calls ?? []).map((c) => [c.function.name, c.function.arguments]),
    m.tool_call_id ?? "",
  ]);

/** True when `view` appears in `line` in order (other messages may stand between). */
function isSubsequence(view: Msg[], line: Msg[]): boolean {
  let i = 0;
  for (const m of line) if (i < view.length && key(m) === key(view[i])) i++;
  return i === view.length;
}

let stack: Stack;
/** In-place edits sent with evidence, per window: the programs must exercise them. */
const inPlace = { wide: 0, narrow: 0 };
/** A window and budget that hold every program's whole conversation, so the model's input can be checked whole. */
let wide: Stack;
/** A window of four messages: most requests are then read against the line read from the store, not the window. */
let narrow: Stack;
beforeAll(async () => {
  wide = await startStack({ memoryOptions: { window: 1000, tokenBudget: 1_000_000, maxMessages: 10_000 } });
  narrow = await startStack({ memoryOptions: { window: 4, tokenBudget: 1_000_000, maxMessages: 10_000 } });
});
afterAll(async () => {
  await wide?.close();
  await narrow?.close();
});

/** A client with its own view of the conversation, sending what each kind of client sends. */
class Client {
  readonly id = newSessionId();
  view: Msg[] = [];
  #n = 0;
  constructor(private readonly run: number) {}

  #text = (what: string) => `${what} ${this.run}.${++this.#n}`;

  /** Sends `messages`, answered by `reply`; returns what the model received and the answer. */
  async #send(messages: Msg[], reply: FakeReply, declared: boolean): Promise<{ sent: Msg[]; answer: Msg }> {
    const line = (await stack.memory.getMessages(this.id).catch(() => [])) as Stored[];
    const proven = alignedEvidence(messages, line);
    stack.fake.setReply(() => reply);
    const before = stack.fake.chatRequests().length;
    const headers: Record<string, string> = { "X-Session-ID": this.id };
    if (declared) headers["X-Threadkeep-Client"] = "whole-history";
    const response = await stack.request("POST", "/v1/chat/completions", {
      body: { model: "fake-model", messages: [SYSTEM, ...messages] },
      headers,
    });
    const body: any = await response.json();
    expect(response.status, JSON.stringify(body)).toBe(200);
    const sent = stack.fake.chatRequests()[before].body.messages.filter((m: Msg) => m.role !== "system") as Msg[];
    // Proof that the client re-sends the whole conversation: the model gets exactly that conversation
    // (in the narrow window, what the window keeps of it, and nothing the client replaced).
    if (proven && stack === wide)
      expect(sent.map(key), `model input for ${JSON.stringify(messages.map((m) => m.content))}`).toEqual(
        messages.map(key),
      );
    if (proven && stack === narrow)
      expect(
        isSubsequence(sent, messages),
        `model input ${JSON.stringify(sent.map((m) => m.content))} for ${JSON.stringify(messages.map((m) => m.content))}`,
      ).toBe(true);
    const message = body.choices[0].message;
    const answer: Msg = {
      role: "assistant",
      content: message.content ?? null,
      ...(message.tool_calls ? { tool_calls: message.tool_calls } : {}),
    };
    return { sent, answer };
  }

  /** A turn: the question, a tool loop of `calls` parallel calls when asked, the answer. Thin clients send only their own turn. */
  async turn(calls: number, whole: boolean, declared: boolean): Promise<Msg[][]> {
    const received: Msg[][] = [];
    const prefix = whole ? [...this.view] : [];
    const turn: Msg[] = [{ role: "user", content: this.#text("question") }];
    if (calls > 0) {
      const toolCalls: Call[] = Array.from({ length: calls }, (_, i) => ({
        id: `call_${this.run}_${this.#n}_${i}`,
        type: "function",
        function: { name: "lookup", arguments: JSON.stringify({ q: this.#n, i }) },
      }));
      const first = await this.#send([...prefix, ...turn], { tool_calls: toolCalls }, declared);
      received.push(first.sent);
      this.view.push(...turn);
      turn.push(
        first.answer,
        ...toolCalls.map((c) => ({ role: "tool" as const, tool_call_id: c.id, content: this.#text("result") })),
      );
      this.view.push(...turn.slice(1));
      const second = await this.#send([...prefix, ...turn], { content: this.#text("answer") }, declared);
      received.push(second.sent);
      this.view.push(second.answer);
    } else {
      const only = await this.#send([...prefix, ...turn], { content: this.#text("answer") }, declared);
      received.push(only.sent);
      this.view.push(...turn, only.answer);
    }
    return received;
  }

  /** Regenerates the last answer of a plain turn: the view without it, sent whole. */
  async regenerate(declared: boolean): Promise<Msg[][]> {
    const last = this.view.at(-1);
    if (!last || last.role !== "assistant" || last.tool_calls || this.view.at(-2)?.role !== "user") return [];
    this.view.pop();
    const { sent, answer } = await this.#send(this.view, { content: this.#text("again") }, declared);
    this.view.push(answer);
    return [sent];
  }

  /**
   * Edits the `nth` message of `role` in place (an assistant's text answer, or a user's question), keeps
   * the rest of the chat and asks on, sent whole. Done only when the request carries evidence (what
   * the property is about; without it a thin reading is right, and the client's view then differs from
   * the line by design).
   */
  async inPlace(
    nth: number,
    role: "user" | "assistant",
    declared: boolean,
    window: "wide" | "narrow",
  ): Promise<Msg[][]> {
    const at = this.view.flatMap((m, i) => (m.role === role && !m.tool_calls && m.content !== null ? [i] : []));
    if (at.length === 0) return [];
    const i = at[nth % at.length];
    const edited = [
      ...this.view.slice(0, i),
      { role, content: this.#text("corrected") },
      ...this.view.slice(i + 1),
      { role: "user" as const, content: this.#text("question") },
    ];
    const line = (await stack.memory.getMessages(this.id)) as Stored[];
    if (!declared && !alignedEvidence(edited, line)) return [];
    if (!declared) inPlace[window]++;
    const { sent, answer } = await this.#send(edited, { content: this.#text("answer") }, declared);
    this.view = [...edited, answer];
    return [sent];
  }

  /** Edits the `nth` user message (of those there are): the view up to it, the new text, sent whole. */
  async edit(nth: number, declared: boolean): Promise<Msg[][]> {
    const users = this.view.flatMap((m, i) => (m.role === "user" ? [i] : []));
    if (users.length === 0) return [];
    const at = users[nth % users.length];
    this.view = [...this.view.slice(0, at), { role: "user", content: this.#text("edited") }];
    const { sent, answer } = await this.#send(this.view, { content: this.#text("answer") }, declared);
    this.view.push(answer);
    return [sent];
  }
}

describe.each(["wide", "narrow"] as const)(
  "request reading, over random mixes of clients on one session (%s window)",
  (window) => {
    let runs = 0;
    it(
      "never moves a message the client still shows off the main line, and the model always gets the client's conversation",
      async () => {
        stack = window === "wide" ? wide : narrow;
        await fc.assert(
          fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 10 }), async (steps) => {
            const client = new Client(++runs);
            // The main line after the previous step.
            let kept: string[] = [];
            for (const s of steps) {
              const before = client.view.length;
              const received =
                s.kind === "thin"
                  ? await client.turn(s.calls, false, false)
                  : s.kind === "whole"
                    ? await client.turn(s.calls, true, s.declared)
                    : s.kind === "regenerate"
                      ? await client.regenerate(s.declared)
                      : s.kind === "edit"
                        ? await client.edit(s.nth, s.declared)
                        : await client.inPlace(s.nth, s.role, s.declared, window);
              if (received.length === 0 && client.view.length === before) continue;
              // The model's last request held the client's conversation up to the answer it then gave, in
              // order (in the narrow window, at least the client's newest message).
              const shown = client.view.slice(0, -1);
              expect(
                isSubsequence(window === "wide" ? shown : shown.slice(-1), received.at(-1)!),
                `model input after ${JSON.stringify(s)}`,
              ).toBe(true);
              if (window === "wide" && clean(steps))
                expect(received.at(-1)!.map(key), `model input after ${JSON.stringify(s)}`).toEqual(shown.map(key));
              const line = (await stack.memory.getMessages(client.id)) as Msg[];
              expect(isSubsequence(client.view, line), `main line after ${JSON.stringify(s)}`).toBe(true);
              // Nothing replaced is lost: what the main line held is on it still, or in a branch.
              const branched = (await stack.memory.listBranches(client.id)).flatMap((b) => b.messages as Msg[]);
              const everywhere = new Set([...line, ...branched].map(key));
              expect(
                kept.filter((k) => !everywhere.has(k)),
                `lost after ${JSON.stringify(s)}`,
              ).toEqual([]);
              kept = line.map(key);
            }
            if (client.view.length === 0) return;
            const line = (await stack.memory.getMessages(client.id)) as Msg[];
            // Clients that never rewrote their history get exactly their conversation, with no branch.
            if (steps.every((s) => s.kind === "thin" || s.kind === "whole")) {
              expect(line.map(key)).toEqual(client.view.map(key));
              expect(await stack.memory.listBranches(client.id)).toEqual([]);
            }
            // A client that declares it sends whole histories gets exactly its view, whatever it rewrote.
            if (steps.every((s) => s.kind !== "thin" && s.declared))
              expect(line.map(key)).toEqual(client.view.map(key));
          }),
          { numRuns: RUNS },
        );
        // The generator reached the case the property is about. How often it does is random (unseeded runs,
        // and only edits that carry evidence count): a floor of RUNS / 10 was missed by chance once in three
        // loaded full runs (6 of 60), which is no sign of a generator that stopped reaching it — none at all is.
        expect(inPlace[window]).toBeGreaterThan(0);
      },
      120_000 * Math.max(1, RUNS / 60),
    );
  },
);
