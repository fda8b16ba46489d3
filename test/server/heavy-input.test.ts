import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { watchEventLoop } from "../_event-loop-gaps.js";
import { type Stack, startStack } from "./_stack.js";

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** Asks /healthz every 20 ms until `done` settles; returns how many it asked and the slowest answer's time in ms. */
async function pollHealthz(url: string, done: Promise<unknown>): Promise<{ slowest: number; asked: number }> {
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
  // Before chunked counting, 100 KB without a space froze the whole server for ~12 s. The bound is on
  // the event loop's longest gap less the time this thread waited for a core, not on /healthz's wall
  // time: on a loaded machine (other test files, other processes) the same work takes several times
  // as long by the clock, which says nothing about the server.
  it("never blocks the event loop for more than half a second while a 5 MB message without spaces is processed", async () => {
    stack = await startStack();
    const session = randomUUID();
    // Serialised before the watch starts: that is the client's work, not the server's.
    const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(5 * 1024 * 1024) }] });
    const loop = watchEventLoop(5);
    const turn = stack.request("POST", "/v1/chat/completions", { headers: { "x-session-id": session }, body });
    const { slowest, asked } = await pollHealthz(stack.url, turn);
    const res = await turn;
    expect(res.status).toBe(200);
    await res.json();
    const longestGap = loop.stop();
    expect(asked).toBeGreaterThan(0);
    expect(
      longestGap,
      `longest event-loop gap (the slowest /healthz took ${Math.round(slowest)} ms by the clock)`,
    ).toBeLessThan(500);
    // The model got the message cut to the budget, with the marker saying so.
    const sent = stack.fake.chatRequests()[0].body.messages.at(-1).content as string;
    expect(sent.length).toBeLessThan(100_000);
    expect(sent).toMatch(/truncated by threadkeep/);
  }, 30_000);
});
