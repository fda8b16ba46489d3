import { createServer as createNetServer, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fakeEmbedding, startFakeUpstream, type FakeUpstream } from "../../test/_fake-upstream.js";
import { createUpstream, StreamAccumulator, UpstreamError } from "./openai-compatible.js";

describe("OpenAI-compatible upstream client", () => {
  let fake: FakeUpstream;
  beforeAll(async () => {
    fake = await startFakeUpstream();
  });
  afterAll(() => fake.close());

  it("sends chat requests with the key and returns the completion", async () => {
    const upstream = createUpstream({ baseUrl: fake.url, apiKey: "sk-server" });
    const result = await upstream.chat({ model: "m", messages: [{ role: "user", content: "hi" }] });
    expect(result.choices?.[0]?.message?.content).toBe("echo: hi");
    const last = fake.requests.at(-1)!;
    expect(last.headers.authorization).toBe("Bearer sk-server");
    expect(last.body.stream).toBe(false);
  });

  it("sends a request again when the upstream closed the kept-alive socket it went out on", async () => {
    // A raw server: the first socket answers once, then drops the next request unanswered, as an
    // upstream closing an idle keep-alive connection at the wrong moment does.
    let connections = 0;
    const body = JSON.stringify({ choices: [{ message: { role: "assistant", content: "ok" } }] });
    const answer = `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: keep-alive\r\n\r\n${body}`;
    const server = createNetServer((socket: Socket) => {
      const first = ++connections === 1;
      let requests = 0;
      socket.on("data", (data) => {
        if (!data.toString().includes("\r\n\r\n")) return;
        requests++;
        if (first && requests === 2) socket.destroy();
        else socket.write(answer);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const upstream = createUpstream({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` });
      const ask = () => upstream.chat({ model: "m", messages: [{ role: "user", content: "x" }] });
      expect((await ask()).choices?.[0]?.message?.content).toBe("ok");
      expect((await ask()).choices?.[0]?.message?.content).toBe("ok");
      expect(connections).toBe(2);
    } finally {
      server.close();
    }
  });

  it("streams chunks that accumulate into the reply", async () => {
    const upstream = createUpstream({ baseUrl: fake.url });
    const events = await upstream.streamChat({ model: "m", messages: [{ role: "user", content: "stream me please" }] });
    const acc = new StreamAccumulator();
    const raw: string[] = [];
    for await (const event of events) {
      raw.push(event.data);
      acc.add(event.chunk);
    }
    expect(raw.at(-1)).toBe("[DONE]");
    expect(acc.message()).toEqual({ role: "assistant", content: "echo: stream me please" });
    expect(acc.finishReason).toBe("stop");
  });

  it("passes upstream errors on with their status and body", async () => {
    fake.setReply(() => ({ status: 429, error: { message: "slow down", code: "rate_limit_exceeded" } }));
    const upstream = createUpstream({ baseUrl: fake.url });
    const error = await upstream.chat({ model: "m", messages: [] }).catch((e) => e);
    expect(error).toBeInstanceOf(UpstreamError);
    expect(error.upstreamStatus).toBe(429);
    expect(error.upstreamBody.error.code).toBe("rate_limit_exceeded");
    const streamError = await upstream.streamChat({ model: "m", messages: [] }).catch((e) => e);
    expect(streamError.upstreamStatus).toBe(429);
  });

  it("reports a reply cut off before its end as unreachable, and reads one sent in pieces whole", async () => {
    const body = JSON.stringify({ choices: [{ message: { role: "assistant", content: "é".repeat(5000) } }] });
    const bytes = Buffer.from(body);
    const head = `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${bytes.length}\r\n\r\n`;
    let cut = true;
    const server = createNetServer((socket: Socket) => {
      socket.once("data", () => {
        socket.write(head);
        // Split inside a two-byte character: the pieces are decoded together, not one by one.
        socket.write(bytes.subarray(0, 1001));
        if (cut) socket.destroy();
        else setTimeout(() => socket.end(bytes.subarray(1001)), 20);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const upstream = createUpstream({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` });
      const error = await upstream.chat({ model: "m", messages: [] }).catch((e) => e);
      expect(error).toBeInstanceOf(UpstreamError);
      expect(error.upstreamStatus).toBe(0);
      cut = false;
      expect((await upstream.chat({ model: "m", messages: [] })).choices?.[0]?.message?.content).toBe("é".repeat(5000));
    } finally {
      server.close();
    }
  });

  it("reports an unreachable upstream as a coded error", async () => {
    const upstream = createUpstream({ baseUrl: "http://127.0.0.1:1/v1", timeoutMs: 2000 });
    const error = await upstream.chat({ model: "m", messages: [] }).catch((e) => e);
    expect(error.code).toBe("upstream_error");
    expect(error.upstreamStatus).toBe(0);
  });

  it("gets embeddings in input order", async () => {
    const upstream = createUpstream({ baseUrl: fake.url });
    const vectors = await upstream.embeddings(["a", "bb"], "emb");
    expect(vectors).toEqual([fakeEmbedding("a"), fakeEmbedding("bb")]);
  });
});

describe("upstream timeouts", () => {
  it("times out a silent upstream but never cuts a stream that is flowing", async () => {
    const fake = await startFakeUpstream();
    try {
      fake.setReply(() => ({ content: "slow but steady reply", delayMs: 150 }));
      const upstream = createUpstream({ baseUrl: fake.url, timeoutMs: 400 });
      const events = await upstream.streamChat({ model: "m", messages: [{ role: "user", content: "x" }] });
      const acc = new StreamAccumulator();
      for await (const event of events) acc.add(event.chunk);
      // Six chunks at 150 ms each take longer than the 400 ms timeout, and all arrive.
      expect(acc.message().content).toBe("slow but steady reply");
      fake.setReply(() => ({ content: "late", delayMs: 1000 }));
      const error = await upstream.chat({ model: "m", messages: [] }).catch((e) => e);
      expect(error).toBeInstanceOf(UpstreamError);
      expect(error.message).toMatch(/timed out: no answer within 400 ms/);
      expect(error.timedOut).toBe(true);
    } finally {
      await fake.close();
    }
  });

  it("gives up on a stream that goes silent mid-way, and on one that never sends its head", async () => {
    const fake = await startFakeUpstream();
    try {
      const upstream = createUpstream({ baseUrl: fake.url, timeoutMs: 300 });
      fake.setReply(() => ({ content: "first words and then nothing", hang: "mid-stream" }));
      const events = await upstream.streamChat({ model: "m", messages: [{ role: "user", content: "x" }] });
      const acc = new StreamAccumulator();
      const started = performance.now();
      const error = await (async () => {
        for await (const event of events) acc.add(event.chunk);
      })().catch((e) => e);
      expect(error).toBeInstanceOf(UpstreamError);
      expect(error.timedOut).toBe(true);
      expect(error.message).toMatch(/the stream sent nothing for 300 ms/);
      expect(acc.message().content).toBe("firs");
      expect(performance.now() - started).toBeLessThan(3000);
      fake.setReply(() => ({ hang: "before-head" }));
      const headless = await upstream.streamChat({ model: "m", messages: [] }).catch((e) => e);
      expect(headless).toBeInstanceOf(UpstreamError);
      expect(headless.message).toMatch(/no answer within 300 ms/);
    } finally {
      await fake.close();
    }
  });

  it("stops a request when its signal aborts", async () => {
    const fake = await startFakeUpstream();
    try {
      fake.setReply(() => ({ content: "never", delayMs: 2000 }));
      const upstream = createUpstream({ baseUrl: fake.url });
      const controller = new AbortController();
      setTimeout(() => controller.abort(new Error("user pressed Ctrl-C")), 50);
      const started = Date.now();
      const error = await upstream.chat({ model: "m", messages: [] }, { signal: controller.signal }).catch((e) => e);
      expect(error.message).toBe("user pressed Ctrl-C");
      expect(Date.now() - started).toBeLessThan(1500);
    } finally {
      await fake.close();
    }
  });

  it("stops a flowing stream when its signal aborts", async () => {
    const fake = await startFakeUpstream();
    try {
      fake.setReply(() => ({ content: "a long reply that keeps coming", delayMs: 100 }));
      const upstream = createUpstream({ baseUrl: fake.url });
      const controller = new AbortController();
      const events = await upstream.streamChat({ model: "m", messages: [] }, { signal: controller.signal });
      const acc = new StreamAccumulator();
      const started = Date.now();
      const error = await (async () => {
        for await (const event of events) {
          acc.add(event.chunk);
          if (acc.content.length > 0) controller.abort(new Error("stop"));
        }
      })().catch((e) => e);
      expect(error).toBeInstanceOf(Error);
      expect(acc.content.length).toBeLessThan("a long reply that keeps coming".length);
      expect(Date.now() - started).toBeLessThan(500);
    } finally {
      await fake.close();
    }
  });
});
