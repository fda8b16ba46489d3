import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Stack, startStack, transcript } from "./_stack.js";

let stack: Stack;
beforeEach(async () => {
  stack = await startStack();
});
afterEach(async () => {
  await stack.close();
});

async function waitFor<T>(fn: () => Promise<T | undefined>, timeoutMs = 5000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("streaming", () => {
  it("streams the events through and stores the reply", async () => {
    stack.fake.setReply(() => ({ content: "Hello there, streaming world" }));
    const id = randomUUID();
    const { data: stream, response } = await stack
      .client()
      .chat.completions.create(
        { model: "fake", messages: [{ role: "user", content: "hi" }], stream: true },
        { headers: { "X-Session-ID": id } },
      )
      .withResponse();
    expect(response.headers.get("x-session-id")).toBe(id);
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    let text = "";
    let chunks = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      chunks++;
    }
    expect(text).toBe("Hello there, streaming world");
    expect(chunks).toBeGreaterThan(5);
    const stored = await stack.memory.getMessages(id);
    expect(stored.map((m) => [m.role, m.content, m.incomplete])).toEqual([
      ["user", "hi", undefined],
      ["assistant", "Hello there, streaming world", undefined],
    ]);
    // The next turn carries the streamed reply.
    await stack
      .client()
      .chat.completions.create(
        { model: "fake", messages: [{ role: "user", content: "again" }] },
        { headers: { "X-Session-ID": id } },
      );
    expect(transcript(stack.fake.chatRequests()[1].body)).toEqual([
      "user: hi",
      "assistant: Hello there, streaming world",
      "user: again",
    ]);
  });

  it("forwards each event as it arrives, not at the end", async () => {
    // Lockstep: the upstream sends each piece only once the client holds the one before it, so a proxy
    // that held back any event (buffered the stream) never finishes, however fast or slow the machine.
    const pieces = Array.from({ length: 10 }, (_, i) => `p${i}..`);
    let received = 0;
    let lockstep = true;
    const waiting = new Map<number, () => void>();
    const clientHolds = (count: number) =>
      new Promise<void>((resolve) => (!lockstep || received >= count ? resolve() : waiting.set(count, resolve)));
    stack.fake.setReply(() => ({ content: pieces.join(""), beforePiece: clientHolds }));
    let text = "";
    const read = (async () => {
      const res = await stack.request("POST", "/v1/chat/completions", {
        body: { model: "m", stream: true, messages: [{ role: "user", content: "x" }] },
      });
      const decoder = new TextDecoder();
      let buffered = "";
      for await (const bytes of res.body as ReadableStream<Uint8Array>) {
        buffered += decoder.decode(bytes, { stream: true });
        const events = buffered.split("\n\n");
        buffered = events.pop()!;
        for (const event of events) {
          if (!event.startsWith("data: {")) continue;
          const content = JSON.parse(event.slice(6)).choices[0]?.delta?.content;
          if (!content) continue;
          text += content;
          received++;
          waiting.get(received)?.();
        }
      }
    })();
    // Reported through the race below; once the stack closes after a failure it would be reported again.
    read.catch(() => {});
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`held back: the client got ${received} of ${pieces.length} pieces`)),
        15_000,
      );
    });
    try {
      await Promise.race([read, stuck]);
    } finally {
      clearTimeout(timer);
      // After a failure the upstream finishes, so the stack can close.
      lockstep = false;
      for (const resolve of waiting.values()) resolve();
    }
    expect(received).toBe(pieces.length);
    expect(text).toBe(pieces.join(""));
  });

  it("stores what was delivered, marked incomplete, when the client disconnects mid-stream", async () => {
    stack.fake.setReply(() => ({ content: "word ".repeat(100), delayMs: 20 }));
    const id = randomUUID();
    const abort = new AbortController();
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": id },
      body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "talk" }] }),
      signal: abort.signal,
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let received = "";
    while ((received.match(/data: /g) ?? []).length < 4)
      received += new TextDecoder().decode((await reader.read()).value);
    abort.abort();
    const stored = await waitFor(async () => {
      // The session exists only once the turn is committed (its first append creates it).
      const messages = await stack.memory.getMessages(id).catch(() => []);
      return messages.length === 2 ? messages : undefined;
    });
    expect(stored[0]).toMatchObject({ role: "user", content: "talk" });
    expect(stored[1]).toMatchObject({ role: "assistant", incomplete: true });
    const partial = stored[1].content as string;
    expect(partial.length).toBeGreaterThan(0);
    expect(partial.length).toBeLessThan("word ".repeat(100).length);
    expect("word ".repeat(100).startsWith(partial)).toBe(true);
    // An incomplete reply is still context for the next turn.
    await stack
      .client()
      .chat.completions.create(
        { model: "m", messages: [{ role: "user", content: "go on" }] },
        { headers: { "X-Session-ID": id } },
      );
    expect(stack.fake.chatRequests()[1].body.messages[1]).toEqual({ role: "assistant", content: partial });
  });

  it("does not call the model for a stream whose client left while waiting for its turn", async () => {
    stack.fake.setReply((body) => ({
      content: `re: ${body.messages.at(-1).content}`,
      delayMs: body.messages.at(-1).content === "slow" ? 300 : 0,
    }));
    const id = randomUUID();
    const first = stack.request("POST", "/v1/chat/completions", {
      headers: { "x-session-id": id },
      body: { model: "m", messages: [{ role: "user", content: "slow" }] },
    });
    await new Promise((r) => setTimeout(r, 30));
    const abort = new AbortController();
    const waiting = fetch(`${stack.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": id },
      body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "impatient" }] }),
      signal: abort.signal,
    }).catch(() => null);
    await new Promise((r) => setTimeout(r, 50));
    abort.abort();
    await waiting;
    expect((await first).status).toBe(200);
    // The session is free again: a later turn runs at once and sees only the first turn.
    await stack
      .client()
      .chat.completions.create(
        { model: "m", messages: [{ role: "user", content: "later" }] },
        { headers: { "X-Session-ID": id } },
      );
    expect(stack.fake.chatRequests().map((r) => r.body.messages.at(-1).content)).toEqual(["slow", "later"]);
    expect((await stack.memory.getMessages(id)).map((m) => m.content)).toEqual([
      "slow",
      "re: slow",
      "later",
      "re: later",
    ]);
  });

  it("passes an upstream error back as JSON with its status and stores nothing", async () => {
    stack.fake.setReply(() => ({
      status: 429,
      error: { message: "slow down", type: "rate_limit_error", code: "rate_limited" },
    }));
    const id = randomUUID();
    const res = await stack.request("POST", "/v1/chat/completions", {
      headers: { "x-session-id": id },
      body: { model: "m", stream: true, messages: [{ role: "user", content: "x" }] },
    });
    expect(res.status).toBe(429);
    expect(res.headers.get("x-session-id")).toBe(id);
    expect(await res.json()).toEqual({
      error: { message: "slow down", type: "rate_limit_error", code: "rate_limited" },
    });
    await expect(stack.memory.getSession(id)).rejects.toMatchObject({ code: "session_not_found" });
  });

  it("replays a streamed turn for a retry with the same Idempotency-Key", async () => {
    const id = randomUUID();
    const send = async () => {
      const res = await stack.request("POST", "/v1/chat/completions", {
        headers: { "x-session-id": id, "idempotency-key": "stream-1" },
        body: { model: "m", stream: true, messages: [{ role: "user", content: "once" }] },
      });
      return {
        text: await res.text(),
        replayed: res.headers.get("idempotent-replayed"),
        type: res.headers.get("content-type"),
      };
    };
    const first = await send();
    const second = await send();
    expect(second.text).toBe(first.text);
    expect(second.replayed).toBe("true");
    expect(second.type).toContain("text/event-stream");
    expect(first.text.trim().endsWith("data: [DONE]")).toBe(true);
    expect(stack.fake.chatRequests()).toHaveLength(1);
    expect(await stack.memory.getMessages(id)).toHaveLength(2);
  });
});
