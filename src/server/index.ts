/**
 * threadkeep/server: the OpenAI-compatible memory proxy and session REST API. Kept apart from the
 * library entry so `import "threadkeep"` never loads fastify.
 */

export type { ServerOptions, ThreadkeepServer } from "./app.js";
export { createServer } from "./app.js";
export type { Authenticator } from "./auth.js";
export { createAuthenticator, isLoopbackHost } from "./auth.js";
export type { IdempotencyOptions } from "./turn/idempotency.js";
export { DEFAULT_FAIR_SHARE, type FairShareOptions, formatRate, parseRate, type RateLimit } from "./fair-share.js";
export type { EndUserOptions, UserJwtOptions } from "./identity.js";
export {
  DEFAULT_USER_JWT_HEADER,
  DEFAULT_USER_JWT_ISSUER,
  describeIdentity,
  endUserId,
  OPERATOR_USER_HEADER,
} from "./identity.js";
export { openApiDocument } from "./openapi/index.js";
export { SESSION_HEADER, WARNING_HEADER } from "./turn/run.js";
export {
  CLIENT_HEADER,
  type ClientHint,
  clientHintOf,
  DEFAULT_SESSION_HEADERS,
  PASS_THROUGH_HEADER,
  ragQueryOf,
  type SideRequestKind,
  TASK_HEADER,
} from "./front-ends/index.js";
export { startTracing, type StopTracing, tracingConfig, type TracingConfig } from "./tracing.js";
export { setTracing } from "../core/tracing.js";
