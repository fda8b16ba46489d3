/**
 * OpenTelemetry spans around threadkeep's steps, through the `@opentelemetry/api` facade only: an
 * SDK (the server's `startTracing`, or the host application's own) registers the provider. While no
 * one has switched tracing on, every helper here is one boolean test and a direct call, so a
 * process without tracing pays nothing for it (`npm run bench -- tracing`).
 */
import {
  type Attributes,
  context,
  type Context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";

let enabled = false;

/**
 * Switches threadkeep's spans on or off. The server's `startTracing` does this; an application that
 * registers its own OpenTelemetry SDK calls `setTracing(true)` to get threadkeep's spans in its traces.
 */
export function setTracing(on: boolean): void {
  enabled = on;
}

/** Whether threadkeep makes spans. */
export function tracingOn(): boolean {
  return enabled;
}

const tracer = () => trace.getTracer("threadkeep");

/** How a span is started. */
export interface SpanOptions {
  attributes?: Attributes;
  /** @default internal */
  kind?: "internal" | "client" | "server";
  /** The parent (an incoming request's extracted context); the active context otherwise. */
  parent?: Context;
}

const KINDS = { internal: SpanKind.INTERNAL, client: SpanKind.CLIENT, server: SpanKind.SERVER };

/** Marks a span failed with the error, as the semantic conventions say (`error.type`, status ERROR). */
export function failSpan(span: Span, error: unknown): void {
  const code = (error as { code?: unknown })?.code;
  span.setAttribute("error.type", typeof code === "string" ? code : ((error as Error)?.name ?? "Error"));
  span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message });
}

/**
 * Runs `fn` in a new active span named `name` (its children are the spans started inside), ended
 * when `fn` settles and marked failed when it throws. Without tracing, `fn(undefined)` is all it does.
 */
export function inSpan<T>(name: string, options: SpanOptions, fn: (span: Span | undefined) => Promise<T>): Promise<T> {
  if (!enabled) return fn(undefined);
  const parent = options.parent ?? context.active();
  return tracer().startActiveSpan(
    name,
    { kind: KINDS[options.kind ?? "internal"], attributes: options.attributes },
    parent,
    async (span) => {
      try {
        return await fn(span);
      } catch (error) {
        failSpan(span, error);
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

/** Starts a span that does not become the active one (a step whose end is not a function's return). */
export function startSpan(name: string, options: SpanOptions = {}): Span | undefined {
  if (!enabled) return undefined;
  return tracer().startSpan(
    name,
    { kind: KINDS[options.kind ?? "internal"], attributes: options.attributes },
    options.parent ?? context.active(),
  );
}

/** The context a request's W3C `traceparent` (and `tracestate`) names; undefined without tracing. */
export function incomingContext(headers: Record<string, string | string[] | undefined>): Context | undefined {
  if (!enabled) return undefined;
  return propagation.extract(ROOT_CONTEXT, headers);
}

/**
 * The W3C trace context headers of the active span, for a request threadkeep sends (the model call):
 * the upstream's own spans then join the caller's trace. Empty without tracing.
 */
export function outgoingTraceHeaders(): Record<string, string> {
  if (!enabled) return {};
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier;
}

/** Runs `fn` with `span` as the active span (its children, and the trace headers sent, hang under it). */
export function withSpan<T>(span: Span | undefined, fn: () => T): T {
  if (!span) return fn();
  return context.with(trace.setSpan(context.active(), span), fn);
}

/**
 * The GenAI semantic convention attributes of a model request (`gen_ai.*`): the operation, the
 * requested model, and the conversation (threadkeep's session id) when there is one.
 */
export function modelRequestAttributes(
  operation: "chat" | "embeddings",
  model: unknown,
  sessionId?: string,
): Attributes {
  const attributes: Attributes = { "gen_ai.operation.name": operation };
  if (typeof model === "string" && model) attributes["gen_ai.request.model"] = model;
  if (sessionId) attributes["gen_ai.conversation.id"] = sessionId;
  return attributes;
}

/** The span name the GenAI conventions give a model request: `{operation} {model}`. */
export function modelSpanName(operation: "chat" | "embeddings", model: unknown): string {
  return typeof model === "string" && model ? `${operation} ${model}` : operation;
}

/**
 * Records what an OpenAI-style reply (or a stream's last chunks) says of itself on a model span:
 * the model that answered, the token usage, why it stopped.
 */
export function recordModelResponse(
  span: Span | undefined,
  reply: {
    model?: unknown;
    usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
    finishReason?: unknown;
    id?: unknown;
  },
): void {
  if (!span) return;
  if (typeof reply.model === "string") span.setAttribute("gen_ai.response.model", reply.model);
  if (typeof reply.id === "string") span.setAttribute("gen_ai.response.id", reply.id);
  const usage = reply.usage;
  if (typeof usage?.prompt_tokens === "number") span.setAttribute("gen_ai.usage.input_tokens", usage.prompt_tokens);
  if (typeof usage?.completion_tokens === "number")
    span.setAttribute("gen_ai.usage.output_tokens", usage.completion_tokens);
  if (typeof reply.finishReason === "string") span.setAttribute("gen_ai.response.finish_reasons", [reply.finishReason]);
}
