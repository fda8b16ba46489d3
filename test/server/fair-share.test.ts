/**
 * Fair share through the real server: one user flooding is refused with 429, `Retry-After` and an
 * OpenAI error body with a stable code, while another user is never refused; a front-end's side
 * requests are counted apart from its turns; a limit per API key covers all of its end users; the
 * defaults are on without any option.
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { renderTask, TITLE_TEMPLATE } from "../_front-ends.js";
import { chat, errorOf, metricValue } from "./_error-helpers.js";
import { type Stack, type StackOptions, startStack } from "./_stack.js";

const KEYS = { "k-alice": "alice", "k-bob": "bob" };
let stack: Stack | undefined;

afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

async function start(options: StackOptions): Promise<Stack> {
  stack = await startStack(options);
  return stack;
}

/** A chat turn of the caller with `key` on a session of its own. */
function turn(s: Stack, key: string, headers: Record<string, string> = {}, body: unknown = chat("hello")) {
  return s.request("POST", "/v1/chat/completions", {
    body,
    headers: { authorization: `Bearer ${key}`, "x-session-id": randomUUID(), ...headers },
  });
}

/** Open WebUI's title request on a chat: one user message that is the rendered task template. */
const titleRequest = () => chat(renderTask(TITLE_TEMPLATE, [{ role: "user", content: "How do I grow tomatoes?" }]));

/** Resolves once the fake upstream has received `n` chat requests in all. */
async function upstreamSaw(s: Stack, n: number): Promise<void> {
  const until = Date.now() + 10_000;
  while (s.fake.chatRequests().length < n) {
    if (Date.now() > until) throw new Error(`the upstream saw ${s.fake.chatRequests().length} chat requests, not ${n}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Resolves once `check` holds (polled), or fails after 10 s. */
async function until(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("the condition never held");
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("fair share", () => {
  it("refuses a user's turns past the concurrency limit with 429 and Retry-After, and never another user's", async () => {
    const s = await start({ apiKeys: KEYS, fairShare: { userConcurrency: 2, userRate: null, refusalDelayMs: 0 } });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    s.fake.setReply(async () => {
      await gate;
      return { content: "done" };
    });
    const flood = Array.from({ length: 8 }, () => turn(s, "k-alice"));
    // Both admitted turns are held at the model until every other one of alice's has been refused.
    await upstreamSaw(s, 2);
    const bob = [turn(s, "k-bob"), turn(s, "k-bob")];
    await upstreamSaw(s, 4);
    await until(
      async () =>
        (await metricValue(s, 'threadkeep_fair_share_refusals_total{limit="user_concurrency",kind="turn"}')) === 6,
    );
    release();
    const answers = await Promise.all(flood);
    const refused = answers.filter((r) => r.status === 429);
    expect(answers.filter((r) => r.status === 200)).toHaveLength(2);
    expect(refused).toHaveLength(6);
    for (const res of refused) {
      expect(res.headers.get("retry-after")).toBe("1");
      expect(await errorOf(res)).toMatchObject({
        type: "rate_limit_error",
        code: "too_many_concurrent_turns",
        message: expect.stringMatching(/at most 2 at once/),
      });
    }
    expect((await Promise.all(bob)).map((r) => r.status)).toEqual([200, 200]);
    expect(await metricValue(s, 'threadkeep_fair_share_refusals_total{limit="user_concurrency",kind="turn"}')).toBe(6);
    expect(await metricValue(s, 'threadkeep_errors_total{code="too_many_concurrent_turns"}')).toBe(6);
    // Nothing of a refused turn reached the model or the store.
    expect(s.fake.chatRequests()).toHaveLength(4);
    expect((await s.memory.listSessions({ userId: "alice" })).sessions).toHaveLength(2);
    // Once alice's turns have ended, her next one is admitted.
    expect((await turn(s, "k-alice")).status).toBe(200);
  });

  it("refuses a user past the rate limit with the seconds until the window reopens; another user goes on", async () => {
    const s = await start({
      apiKeys: KEYS,
      fairShare: { userConcurrency: 0, userRate: { requests: 3, seconds: 60 }, refusalDelayMs: 0 },
    });
    for (let i = 0; i < 3; i++) expect((await turn(s, "k-alice")).status).toBe(200);
    const refused = await turn(s, "k-alice");
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(await errorOf(refused)).toMatchObject({
      type: "rate_limit_error",
      code: "rate_limited",
      message: expect.stringMatching(/3\/min turns/),
    });
    // The Responses API is counted in the same bucket.
    const responses = await s.request("POST", "/v1/responses", {
      body: { model: "m", input: "hi" },
      headers: { authorization: "Bearer k-alice" },
    });
    expect(responses.status).toBe(429);
    expect((await errorOf(responses)).code).toBe("rate_limited");
    for (let i = 0; i < 3; i++) expect((await turn(s, "k-bob")).status).toBe(200);
    expect(await metricValue(s, 'threadkeep_fair_share_refusals_total{limit="user_rate",kind="turn"}')).toBe(2);
  });

  it("counts a front-end's side requests apart: they are not blocked by the chat's turns, nor block them", async () => {
    const s = await start({ apiKeys: KEYS, fairShare: { userConcurrency: 1, userRate: null, refusalDelayMs: 0 } });
    let hold: "turn" | "side" = "turn";
    let release!: () => void;
    let gate = new Promise<void>((r) => (release = r));
    s.fake.setReply(async (body) => {
      const side = String(body.messages.at(-1).content).startsWith("### Task");
      if ((side ? "side" : "turn") === hold) await gate;
      return { content: side ? '{"title": "Tomatoes"}' : "done" };
    });
    const headers = { "x-openwebui-chat-id": randomUUID() };
    // The chat's turn holds alice's one turn place, streaming, while Open WebUI asks for a title.
    const heldTurn = turn(s, "k-alice", headers, { ...chat("hold"), stream: true });
    await upstreamSaw(s, 1);
    const title = await turn(s, "k-alice", headers, titleRequest());
    expect(title.status).toBe(200);
    expect(title.headers.get("x-threadkeep-pass-through")).toBe("title");
    // The turn limit itself is on: a second turn meanwhile is refused.
    expect((await turn(s, "k-alice", headers)).status).toBe(429);
    release();
    const streamed = await heldTurn;
    expect(streamed.status).toBe(200);
    expect(await streamed.text()).toContain("[DONE]");

    // And the other way round: a title request in flight leaves the chat's turn its place.
    hold = "side";
    gate = new Promise<void>((r) => (release = r));
    const heldTitle = turn(s, "k-alice", headers, titleRequest());
    await upstreamSaw(s, 3);
    expect((await turn(s, "k-alice", headers)).status).toBe(200);
    const secondTitle = await turn(s, "k-alice", headers, titleRequest());
    expect(secondTitle.status).toBe(429);
    expect((await errorOf(secondTitle)).message).toMatch(/side requests/);
    release();
    expect((await heldTitle).status).toBe(200);
    expect(await metricValue(s, 'threadkeep_fair_share_refusals_total{limit="user_concurrency",kind="side"}')).toBe(1);
    expect(await metricValue(s, 'threadkeep_fair_share_refusals_total{limit="user_concurrency",kind="turn"}')).toBe(1);
  });

  it("limits all end users of one API key together", async () => {
    const s = await start({
      apiKeys: { "k-gateway": "gateway", "k-other": "other" },
      userHeader: "x-openwebui-user-id",
      fairShare: { userConcurrency: 2, userRate: null, keyConcurrency: 3, refusalDelayMs: 0 },
    });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    s.fake.setReply(async () => {
      await gate;
      return { content: "done" };
    });
    const first = [
      turn(s, "k-gateway", { "x-openwebui-user-id": "ada" }),
      turn(s, "k-gateway", { "x-openwebui-user-id": "ada" }),
    ];
    const second = turn(s, "k-gateway", { "x-openwebui-user-id": "grace" });
    await upstreamSaw(s, 3);
    // Each end user is within their own two, but the key has its three in flight.
    const refused = await turn(s, "k-gateway", { "x-openwebui-user-id": "grace" });
    expect(refused.status).toBe(429);
    expect(await errorOf(refused)).toMatchObject({
      code: "too_many_concurrent_turns",
      message: expect.stringMatching(/this API key: at most 3/),
    });
    // Another key is not touched by it.
    const other = turn(s, "k-other");
    await upstreamSaw(s, 4);
    release();
    expect((await Promise.all([...first, second, other])).map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(await metricValue(s, 'threadkeep_fair_share_refusals_total{limit="key_concurrency",kind="turn"}')).toBe(1);
  });

  it("is on by default: a 17th turn in flight of one user is refused, after the refusal delay", async () => {
    const s = await start({ fairShare: undefined });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    s.fake.setReply(async () => {
      await gate;
      return { content: "done" };
    });
    const admitted = Array.from({ length: 16 }, () => turn(s, "any"));
    await upstreamSaw(s, 16);
    const started = performance.now();
    const refused = await turn(s, "any");
    expect(refused.status).toBe(429);
    expect((await errorOf(refused)).code).toBe("too_many_concurrent_turns");
    // Held a second (DEFAULT_FAIR_SHARE.refusalDelayMs), so a client retrying at once cannot spin.
    expect(performance.now() - started).toBeGreaterThanOrEqual(990);
    release();
    expect((await Promise.all(admitted)).every((r) => r.status === 200)).toBe(true);
  });
});
