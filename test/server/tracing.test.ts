/**
 * OpenTelemetry traces, end to end: the server configured by the standard OTEL_* variables exports
 * a turn's spans over OTLP/HTTP (http/json) to a receiver this test runs on 127.0.0.1, continuing
 * the caller's W3C traceparent and passing it on to the upstream model request.
 */
import { createServer as createHttpServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createSummarizer } from "../../src/llm/summarizer.js";
import { createEmbedder } from "../../src/llm/embedder.js";
import { startTracing, type StopTracing, tracingConfig } from "../../src/server/index.js";
import { type Stack, startStack } from "./_stack.js";

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  service: unknown;
}

/** The values of OTLP/JSON attributes (`{ key, value: { stringValue | intValue | … } }`). */
function attributesOf(list: { key: string; value: Record<string, any> }[] = []): Record<string, unknown> {
  const value = (v: Record<string, any>): unknown =>
    "stringValue" in v
      ? v.stringValue
      : "intValue" in v
        ? Number(v.intValue)
        : "boolValue" in v
          ? v.boolValue
          : "doubleValue" in v
            ? v.doubleValue
            : "arrayValue" in v
              ? (v.arrayValue.values ?? []).map(value)
              : undefined;
  return Object.fromEntries(list.map((a) => [a.key, value(a.value)]));
}

let receiver: Server;
const spans: ExportedSpan[] = [];
const contentTypes: string[] = [];
let stack: Stack;
let stopTracing: StopTracing | undefined;

const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";

beforeAll(async () => {
  receiver = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      contentTypes.push(String(req.headers["content-type"]));
      if (req.url === "/v1/traces") {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        for (const rs of body.resourceSpans ?? []) {
          const service = attributesOf(rs.resource?.attributes)["service.name"];
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              spans.push({
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId || undefined,
                name: s.name,
                kind: s.kind,
                attributes: attributesOf(s.attributes),
                service,
              });
            }
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const port = (receiver.address() as AddressInfo).port;
  vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", `http://127.0.0.1:${port}`);
  vi.stubEnv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
  vi.stubEnv("OTEL_SERVICE_NAME", "threadkeep-under-test");
  vi.stubEnv("OTEL_TRACES_SAMPLER", "parentbased_always_on");
  // The batch processor exports every 5 s by default; the test waits for its spans.
  vi.stubEnv("OTEL_BSP_SCHEDULE_DELAY", "50");
  stopTracing = await startTracing();
  // The upstream's URL is known once it runs: the summarizer and embedder are given a base URL that
  // a placeholder fills, so the one fake upstream serves the turn, the summaries and the embeddings.
  const late = { url: "" };
  stack = await startStack({
    memoryOptions: {
      window: 2,
      compaction: { threshold: 2, background: true },
      summarizer: {
        summarize: (request) => createSummarizer({ baseUrl: late.url, model: "fake-summary" }).summarize(request),
      },
      embedder: {
        model: "fake-embed",
        embed: (texts) => createEmbedder({ baseUrl: late.url, model: "fake-embed" }).embed(texts),
      },
    },
  });
  late.url = stack.fake.url;
});

afterAll(async () => {
  await stack?.close();
  await stopTracing?.();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
  vi.unstubAllEnvs();
});

describe("tracing configuration", () => {
  it("is off without an OTLP endpoint, or when disabled", () => {
    expect(tracingConfig({})).toBeUndefined();
    expect(
      tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_SDK_DISABLED: "true" }),
    ).toBeUndefined();
    expect(
      tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_TRACES_EXPORTER: "none" }),
    ).toBeUndefined();
  });

  it("defaults to http/protobuf and the service name threadkeep", () => {
    expect(tracingConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://127.0.0.1:4318/v1/traces" })).toEqual({
      protocol: "http/protobuf",
      serviceName: "threadkeep",
    });
  });

  it("refuses a protocol it cannot export with, naming the variable", () => {
    expect(() =>
      tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4317", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }),
    ).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL="grpc"/);
    expect(() =>
      tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4317", OTEL_TRACES_EXPORTER: "zipkin" }),
    ).toThrow(/OTEL_TRACES_EXPORTER/);
  });
});

const traceparent = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;

/** Waits until the exporter has delivered spans that `done` accepts (the batch processor flushes on a timer). */
async function exported(done: (all: ExportedSpan[]) => boolean): Promise<ExportedSpan[]> {
  for (let i = 0; i < 200 && !done(spans); i++) await new Promise((r) => setTimeout(r, 50));
  return spans;
}

describe("a turn's trace", () => {
  it("reaches the OTLP receiver with the turn's steps, the GenAI attributes and the caller's trace id", async () => {
    const session = crypto.randomUUID();
    const client = stack.client();
    for (let i = 0; i < 3; i++) {
      await client.chat.completions.create(
        { model: "fake-model", messages: [{ role: "user", content: `question ${i} about cars` }] },
        { headers: { "x-session-id": session, traceparent } },
      );
    }
    const all = await exported(
      (s) => s.some((x) => x.name === "threadkeep.summarize") && s.some((x) => x.name === "threadkeep.embed"),
    );
    const turns = all.filter((s) => s.name === "threadkeep.turn");
    expect(turns).toHaveLength(3);
    for (const turn of turns) {
      // The caller's trace continues: same trace id, the caller's span as the parent.
      expect(turn.traceId).toBe(CALLER_TRACE);
      expect(turn.parentSpanId).toBe(CALLER_SPAN);
      expect(turn.kind).toBe(2); // SERVER
      expect(turn.attributes["gen_ai.conversation.id"]).toBe(session);
      expect(turn.service).toBe("threadkeep-under-test");
    }
    const childrenOf = (parent: ExportedSpan) =>
      all
        .filter((s) => s.parentSpanId === parent.spanId)
        .map((s) => s.name)
        .sort();
    expect(childrenOf(turns[0])).toEqual(
      expect.arrayContaining([
        "chat fake-model",
        "threadkeep.commit",
        "threadkeep.context",
        "threadkeep.lease",
        "threadkeep.store.read",
      ]),
    );
    const model = all.find((s) => s.name === "chat fake-model" && s.parentSpanId === turns[0].spanId)!;
    expect(model.kind).toBe(3); // CLIENT
    expect(model.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "fake-model",
      "gen_ai.conversation.id": session,
      "gen_ai.usage.input_tokens": 10,
      "gen_ai.usage.output_tokens": 5,
    });
    // The upstream model request carried the trace on: the caller's trace id, the model span as parent.
    const sentUp = stack.fake.chatRequests().filter((r) => r.body?.model === "fake-model");
    expect(sentUp).toHaveLength(3);
    const modelSpans = new Set(all.filter((s) => s.name === "chat fake-model").map((s) => s.spanId));
    for (const request of sentUp) {
      const [, traceId, parentId] = String(request.headers.traceparent).split("-");
      expect(traceId).toBe(CALLER_TRACE);
      expect(modelSpans.has(parentId)).toBe(true);
    }
    // Background work of the turn: the summary and the embeddings, in the caller's trace too.
    const summary = all.find((s) => s.name === "threadkeep.summarize")!;
    expect(summary.traceId).toBe(CALLER_TRACE);
    expect(summary.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "fake-summary",
      "gen_ai.conversation.id": session,
    });
    const embed = all.find((s) => s.name === "threadkeep.embed")!;
    expect(embed.attributes).toMatchObject({
      "gen_ai.operation.name": "embeddings",
      "gen_ai.request.model": "fake-embed",
    });
    expect(contentTypes.every((t) => t.startsWith("application/json"))).toBe(true);
  });

  it("covers a streamed turn, with the usage the stream's last chunk reports", async () => {
    const session = crypto.randomUUID();
    const stream = await stack.client().chat.completions.create(
      {
        model: "fake-model",
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: "stream it" }],
      },
      { headers: { "x-session-id": session } },
    );
    for await (const chunk of stream) void chunk;
    const all = await exported((s) =>
      s.some(
        (x) =>
          x.name === "threadkeep.turn" &&
          x.attributes["gen_ai.conversation.id"] === session &&
          x.attributes["threadkeep.stream"] === true,
      ),
    );
    const turn = all.find((s) => s.name === "threadkeep.turn" && s.attributes["gen_ai.conversation.id"] === session)!;
    // No traceparent: a trace of its own.
    expect(turn.traceId).not.toBe(CALLER_TRACE);
    expect(turn.parentSpanId).toBeUndefined();
    await exported((s) => s.some((x) => x.name === "chat fake-model" && x.parentSpanId === turn.spanId));
    const model = all.find((s) => s.name === "chat fake-model" && s.parentSpanId === turn.spanId)!;
    expect(model.attributes).toMatchObject({
      "gen_ai.usage.input_tokens": 10,
      "gen_ai.usage.output_tokens": 5,
      "gen_ai.response.finish_reasons": ["stop"],
    });
  });
});
