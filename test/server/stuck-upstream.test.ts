/**
 * An upstream that accepts a turn and never answers: before its head, or mid-stream. The turn ends
 * after the upstream timeout with a clear error (`504 upstream_timeout`, or an `upstream_timeout`
 * error event in the stream), its turn lease is given back, and the same session serves its next turn
 * at once, not after the lease's lifetime (set to a minute here, so only a release lets it through).
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chat, errorOf, metricValue } from "./_error-helpers.js";
import { type Stack, startStack } from "./_stack.js";

/**
 * The upstream time-out, which each case here waits out once. It also bounds every answer the fake
 * upstream does give (the head of the mid-stream replies, the whole next turn), and the fake runs in
 * this process: on 2 cores at load 17-23 those took up to 377 ms, and a 300 ms time-out failed 1 run in
 * 10 (a next turn answered 504). Five times the slowest seen.
 */
const TIMEOUT_MS = 2_000;
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ upstreamTimeoutMs: TIMEOUT_MS, memoryOptions: { leaseTtlMs: 60_000 } });
});

afterAll(async () => {
  await stack?.close();
});

function turn(sessionId: string, body: unknown) {
  return stack.request("POST", "/v1/chat/completions", { body, headers: { "x-session-id": sessionId } });
}

/** The next turn on the session, answered well within the one-minute lease: the stuck turn let go of it. */
async function nextTurnServes(sessionId: string): Promise<void> {
  stack.fake.setReply(() => ({ content: "back again" }));
  const started = performance.now();
  const next = await turn(sessionId, chat("are you there?"));
  expect(next.status).toBe(200);
  expect(((await next.json()) as any).choices[0].message.content).toBe("back again");
  expect(performance.now() - started).toBeLessThan(10_000);
}

describe("an upstream that never answers", () => {
  it("before its head: the turn answers 504 upstream_timeout, stores nothing, and the session goes on", async () => {
    const sessionId = randomUUID();
    stack.fake.setReply(() => ({ hang: "before-head" }));
    const stuck = await turn(sessionId, chat("hello?"));
    expect(stuck.status).toBe(504);
    expect(await errorOf(stuck)).toMatchObject({
      type: "server_error",
      code: "upstream_timeout",
      message: expect.stringMatching(new RegExp(`timed out: no answer within ${TIMEOUT_MS} ms`)),
    });
    expect(await metricValue(stack, 'threadkeep_errors_total{code="upstream_timeout"}')).toBeGreaterThanOrEqual(1);
    await nextTurnServes(sessionId);
    const stored = await stack.memory.getMessages(sessionId);
    expect(stored.map((m) => m.content)).toEqual(["are you there?", "back again"]);
  });

  it("mid-stream: the stream ends with an upstream_timeout error event, keeps what came as incomplete, and the session goes on", async () => {
    const sessionId = randomUUID();
    stack.fake.setReply(() => ({ content: "the first words, then silence", hang: "mid-stream" }));
    const stuck = await turn(sessionId, { ...chat("tell me a story"), stream: true });
    expect(stuck.status).toBe(200);
    const events = (await stuck.text()).split("\n\n").filter(Boolean);
    const error = events.map((e) => JSON.parse(e.replace(/^data: /, "") || "null")).find((e) => e?.error)?.error;
    expect(error).toMatchObject({
      code: "upstream_timeout",
      message: expect.stringMatching(new RegExp(`the stream sent nothing for ${TIMEOUT_MS} ms`)),
    });
    expect(events).not.toContain("data: [DONE]");
    expect(await metricValue(stack, 'threadkeep_errors_total{code="upstream_stream_stalled"}')).toBeGreaterThanOrEqual(
      1,
    );
    const stored = await stack.memory.getMessages(sessionId);
    expect(stored.map((m) => [m.role, m.content, m.incomplete ?? false])).toEqual([
      ["user", "tell me a story", false],
      ["assistant", "the ", true],
    ]);
    await nextTurnServes(sessionId);
  });

  it("mid-stream on the Responses API: the response fails with the timeout's message, and the session goes on", async () => {
    const sessionId = randomUUID();
    stack.fake.setReply(() => ({ content: "the first words, then silence", hang: "mid-stream" }));
    const stuck = await stack.request("POST", "/v1/responses", {
      body: { model: "m", input: "tell me a story", stream: true },
      headers: { "x-session-id": sessionId },
    });
    expect(stuck.status).toBe(200);
    const text = await stuck.text();
    const failed = /event: response\.failed\ndata: (.*)/.exec(text)?.[1];
    expect(failed).toBeDefined();
    expect(JSON.parse(failed as string).response).toMatchObject({
      status: "failed",
      error: { message: expect.stringMatching(new RegExp(`timed out: the stream sent nothing for ${TIMEOUT_MS} ms`)) },
    });
    await nextTurnServes(sessionId);
  });
});
