import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { type Stack, startStack } from "./_stack.js";

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** Asks /healthz every 20 ms until `done` settles; returns the slowest answer's time in ms. */
async function slowestHealthz(url: string, done: Promise<unknown>): Promise<{ slowest: number; asked: number }> {
  let finished = false;
  void done.finally(() => {
    finished = true;
  });
  let slowest = 0;
  let asked = 0;
  while (!finished) {
    const start = performance.now();
    const res = await fetch(`${url}/healthz`);
    expect(res.status).toBe(200);
    await res.text();
    slowest = Math.max(slowest, performance.now() - start);
    asked++;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { slowest, asked };
}

describe("heavy input", () => {
  // Before chunked counting, 100 KB without a space froze the whole server for ~12 s.
  it("answers /healthz within a second while a 5 MB message without spaces is processed", async () => {
    stack = await startStack();
    const session = randomUUID();
    const text = "x".repeat(5 * 1024 * 1024);
    const turn = stack.request("POST", "/v1/chat/completions", {
      headers: { "x-session-id": session },
      body: { model: "m", messages: [{ role: "user", content: text }] },
    });
    const { slowest, asked } = await slowestHealthz(stack.url, turn);
    const res = await turn;
    expect(res.status).toBe(200);
    await res.json();
    expect(asked).toBeGreaterThan(0);
    expect(slowest).toBeLessThan(1000);
    // The model got the message cut to the budget, with the marker saying so.
    const sent = stack.fake.chatRequests()[0].body.messages.at(-1).content as string;
    expect(sent.length).toBeLessThan(100_000);
    expect(sent).toMatch(/truncated by threadkeep/);
  }, 30_000);
});
