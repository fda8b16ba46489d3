import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { isThreadkeepError } from "../core/errors.js";
import { UpstreamError } from "../llm/openai-compatible.js";

/** The OpenAI error body every failing endpoint answers with. */
export interface ErrorBody {
  error: { message: string; type: string; code: string; param?: string | null };
}

/** OpenAI's error `type` for a status. */
export function errorType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

/** Builds an OpenAI error body. */
export function errorBody(status: number, code: string, message: string, param?: string): ErrorBody {
  return { error: { message, type: errorType(status), code, ...(param === undefined ? {} : { param }) } };
}

/** An HTTP answer: status plus body. */
export interface HttpFailure {
  status: number;
  body: unknown;
  /** The code counted in metrics. */
  code: string;
  /** Headers to send with it (an upstream's `retry-after`, `x-ratelimit-*`, `x-request-id`). */
  headers?: Record<string, string>;
}

// Fastify's own request errors: what the client sent was wrong, so they get a 4xx with a stable code.
const FASTIFY_CODES: Record<string, { status: number; code: string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: "payload_too_large" },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, code: "unsupported_media_type" },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, code: "invalid_request" },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: "invalid_request" },
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, code: "invalid_request" },
  FST_ERR_VALIDATION: { status: 400, code: "invalid_request" },
  FST_ERR_BAD_URL: { status: 400, code: "invalid_request" },
  FST_ERR_MAX_PARAM_LENGTH: { status: 414, code: "uri_too_long" },
};

/**
 * Turns any thrown value into what the client sees. Upstream errors keep the upstream's status and
 * body; coded errors their table status; fastify's request errors a 4xx; anything else an opaque 500.
 */
export function toHttpFailure(error: unknown): HttpFailure & { unexpected: boolean } {
  if (error instanceof UpstreamError) {
    if (error.upstreamStatus >= 400) {
      return {
        status: error.upstreamStatus,
        body: upstreamErrorBody(error),
        code: "upstream_error",
        unexpected: false,
        headers: error.upstreamHeaders,
      };
    }
    // An upstream that went silent is told apart from one that could not be reached.
    const [status, code] = error.timedOut ? [504, "upstream_timeout"] : [502, "upstream_error"];
    return { status, body: errorBody(status, code, error.message), code, unexpected: false };
  }
  if (isThreadkeepError(error)) {
    const param = typeof error.details?.field === "string" ? paramOf(error.details) : undefined;
    const retryAfter = error.details?.retryAfterSeconds;
    return {
      status: error.status,
      body: errorBody(error.status, error.code, error.message, param),
      code: error.code,
      unexpected: error.status >= 500,
      ...(typeof retryAfter === "number" ? { headers: { "retry-after": String(retryAfter) } } : {}),
    };
  }
  const fastifyCode = (error as FastifyError | undefined)?.code;
  const known = fastifyCode ? FASTIFY_CODES[fastifyCode] : undefined;
  if (known) {
    const message =
      known.status === 415
        ? `${(error as Error).message}: send Content-Type: application/json`
        : (error as Error).message;
    return {
      status: known.status,
      body: errorBody(known.status, known.code, message),
      code: known.code,
      unexpected: false,
    };
  }
  const status = (error as FastifyError | undefined)?.statusCode;
  if (typeof status === "number" && status >= 400 && status < 500) {
    return {
      status,
      body: errorBody(status, "invalid_request", (error as Error).message),
      code: "invalid_request",
      unexpected: false,
    };
  }
  return {
    status: 500,
    body: errorBody(500, "internal_error", "Internal server error"),
    code: "internal_error",
    unexpected: true,
  };
}

/** The upstream's own error body when it is the OpenAI shape, else one wrapping what it said. */
function upstreamErrorBody(error: UpstreamError): unknown {
  const body: unknown = error.upstreamBody;
  const inner = body && typeof body === "object" ? (body as { error?: unknown }).error : undefined;
  if (inner && typeof inner === "object") return body;
  const text = typeof body === "string" && body ? body.slice(0, 500) : error.message;
  return errorBody(error.upstreamStatus, "upstream_error", text);
}

function paramOf(details: Record<string, unknown>): string {
  const index = details.index;
  const field = String(details.field);
  if (typeof index === "number") return field ? `messages[${index}].${field}` : `messages[${index}]`;
  return field;
}

/** Sends a failure, counting it; unexpected ones are logged with their stack. */
export function sendFailure(
  request: FastifyRequest,
  reply: FastifyReply,
  error: unknown,
  count: (code: string) => void,
): FastifyReply {
  const failure = toHttpFailure(error);
  if (failure.unexpected) request.log.error({ err: error }, "request failed");
  count(failure.code);
  if (failure.headers) reply.headers(failure.headers);
  return reply.code(failure.status).type("application/json").send(failure.body);
}

/**
 * Installs the error and not-found handlers: every failure is an OpenAI error body. `decorate` may
 * add headers to an error response first.
 */
export function installErrorHandlers(
  app: FastifyInstance,
  count: (code: string) => void,
  decorate: (request: FastifyRequest, reply: FastifyReply) => void = () => {},
): void {
  app.setErrorHandler((error, request, reply) => {
    decorate(request, reply);
    return sendFailure(request, reply, error, count);
  });
  app.setNotFoundHandler((request, reply) => {
    count("not_found");
    reply.code(404).send(errorBody(404, "not_found", `No route ${request.method} ${request.url.split("?")[0]}`));
  });
}
