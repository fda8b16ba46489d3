/**
 * OpenTelemetry traces for the server, configured by the standard `OTEL_*` environment variables
 * and off unless an OTLP endpoint is set. The SDK and the exporters are imported only when tracing
 * is on, so a server without it neither loads nor pays for them.
 */
import { ThreadkeepError } from "../core/errors.js";
import { setTracing } from "../core/tracing.js";

/** The OTLP protocols threadkeep can export with (gRPC would need a native HTTP/2 client package). */
const PROTOCOLS = ["http/protobuf", "http/json"] as const;

/** What {@link tracingConfig} read from the environment. */
export interface TracingConfig {
  protocol: (typeof PROTOCOLS)[number];
  serviceName: string;
}

const truthy = (value: string | undefined) => value?.trim().toLowerCase() === "true";

/**
 * Whether the environment asks for traces, and how: on when `OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, unless `OTEL_SDK_DISABLED=true` or
 * `OTEL_TRACES_EXPORTER=none`. The exporter itself reads the endpoint, `OTEL_EXPORTER_OTLP_HEADERS`
 * and timeouts; the SDK reads `OTEL_TRACES_SAMPLER[_ARG]` and `OTEL_RESOURCE_ATTRIBUTES`.
 * @throws ThreadkeepError `invalid_request` naming the variable for a protocol or exporter threadkeep cannot use.
 */
export function tracingConfig(env: NodeJS.ProcessEnv = process.env): TracingConfig | undefined {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint || truthy(env.OTEL_SDK_DISABLED)) return undefined;
  const exporters = (env.OTEL_TRACES_EXPORTER || "otlp").split(",").map((e) => e.trim().toLowerCase());
  if (exporters.includes("none")) return undefined;
  if (exporters.some((e) => e !== "otlp")) {
    throw new ThreadkeepError(
      "invalid_request",
      `OTEL_TRACES_EXPORTER="${env.OTEL_TRACES_EXPORTER}": threadkeep exports traces with otlp only (or none)`,
    );
  }
  const variable = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
    ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = (env[variable] || "http/protobuf").trim();
  if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
    throw new ThreadkeepError(
      "invalid_request",
      `${variable}="${protocol}": threadkeep exports traces over ${PROTOCOLS.join(" or ")}`,
    );
  }
  return { protocol: protocol as TracingConfig["protocol"], serviceName: env.OTEL_SERVICE_NAME || "threadkeep" };
}

/** Flushes the spans not yet exported and stops exporting. */
export type StopTracing = () => Promise<void>;

/**
 * Starts exporting traces when the environment asks for it ({@link tracingConfig}): registers a
 * tracer provider with a batching OTLP/HTTP exporter, the W3C trace context propagator and an
 * async-local context, and switches threadkeep's spans on. @returns how to flush and stop, or
 * undefined when tracing is off.
 */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<StopTracing | undefined> {
  const config = tracingConfig(env);
  if (!config) return undefined;
  const [{ NodeTracerProvider, BatchSpanProcessor }, resources, exporterModule] = await Promise.all([
    import("@opentelemetry/sdk-trace-node"),
    import("@opentelemetry/resources"),
    config.protocol === "http/json"
      ? import("@opentelemetry/exporter-trace-otlp-http")
      : import("@opentelemetry/exporter-trace-otlp-proto"),
  ]);
  // The service name defaults to threadkeep; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ "service.name": config.serviceName }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new exporterModule.OTLPTraceExporter())],
  });
  provider.register();
  setTracing(true);
  return async () => {
    setTracing(false);
    await provider.shutdown();
  };
}
