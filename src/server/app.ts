/**
 * The HTTP server: a thin fastify shell around one {@link Memory}. Each HTTP API registers its own
 * routes (routes/) around the proxied turn they share (turn/); this file wires auth, errors, metrics,
 * health and the OpenAPI document (openapi/).
 */
import { MemoryExtractor } from "./user-memories/extractor.js";
import Fastify, { type FastifyInstance, type FastifyServerOptions, LogController } from "fastify";
import { assembleContext } from "../core/context/assemble.js";
import { ThreadkeepError } from "../core/errors.js";
import { canStoreVectors } from "../core/vector-types.js";
import { isValidSessionId } from "../core/ids.js";
import { checkJson } from "../core/json-limits.js";
import { Memory, type MemoryOptions } from "../core/memory/memory.js";
import { createMemory } from "../create-memory.js";
import { createUpstream, type Upstream, type UpstreamOptions } from "../llm/openai-compatible.js";
import { createAuthenticator, createOperatorCheck, toApiKeyMap } from "./auth.js";
import { installBodyDrain } from "./body-drain.js";
import { installJsonParser } from "./json-body.js";
import { type ClientLimits, createConnectionGuard, resolveClientLimits } from "./connections.js";
import { installErrorHandlers, sendFailure, toHttpFailure } from "./errors.js";
import { IdempotencyCache, type IdempotencyOptions } from "./turn/idempotency.js";
import { checkTenantIds, createUserResolver, hasEndUsers, operatorUser, type UserJwtOptions } from "./identity.js";
import { ServerMetrics } from "./metrics.js";
import { FairShare, type FairShareOptions } from "./fair-share.js";
import { openApiDocument } from "./openapi/index.js";
import { serviceContracts } from "./openapi/service.js";
import { addRoute } from "./openapi/route.js";
import { MCP_PATH, registerMcpRoutes } from "./mcp/http.js";
import { registerChatCompletionRoutes } from "./routes/chat-completions.js";
import { SESSION_HEADER } from "./turn/run.js";
import { DEFAULT_SESSION_HEADERS } from "./front-ends/index.js";
import { registerInspector } from "./routes/inspector.js";
import { registerSearchRoutes } from "./routes/search.js";
import { registerMemoryRoutes } from "./routes/memories.js";
import { registerSessionActions } from "./routes/session-actions.js";
import { registerSessionRoutes } from "./routes/sessions.js";
import { registerBranchRoutes } from "./routes/branches.js";
import { registerConversationRoutes } from "./routes/conversations.js";
import { registerModelRoutes } from "./routes/models.js";
import { registerResponseRoutes } from "./routes/responses/index.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated user (the API key's, or its end user's): the owner of every session this request touches. */
    userId: string;
    /** The API key's user (the tenant), which `userId` is or is an end user of. */
    tenantId: string;
    /** True when the request's key is an operator key (`ServerOptions.operatorKeys`). */
    operator: boolean;
  }
}

/** Options of {@link createServer}. */
export interface ServerOptions {
  /** The memory to serve (left open on close), or options to create one (closed with the server). */
  memory: Memory | MemoryOptions;
  /** The OpenAI-compatible model API: a client, its options, or its base URL. Without it chat answers 503. */
  upstream?: Upstream | UpstreamOptions | string;
  /** The server's own upstream key, when `upstream` is a URL. Never taken from or shown to clients. */
  upstreamKey?: string;
  /** threadkeep API key → user id. Empty: no authentication, every caller is the default user. */
  apiKeys?: ReadonlyMap<string, string> | Record<string, string>;
  /**
   * Which of `apiKeys` are operator keys: such a key may act as any end user of its own tenant by
   * naming them in `X-Threadkeep-User` (the inspector's "open user"); any other key sending that
   * header is `403 operator_only`. Needs end users (`userHeader` or `userJwt`). @default none
   */
  operatorKeys?: Iterable<string>;
  /**
   * A header a gateway sets to the end user on whose behalf it calls (e.g. `X-OpenWebUI-User-Id`):
   * each end user then owns their sessions alone, as `<key's user>/<end user>`. Trust it only when
   * nothing but the gateway can reach the server. Unset: such headers are ignored.
   */
  userHeader?: string;
  /**
   * A signed token naming the end user (Open WebUI's `X-OpenWebUI-User-Jwt`, HS256, `sub`). When
   * set, end users come only from valid tokens: a bad or expired one is `401 invalid_user_token`,
   * and so is `userHeader` sent without a token.
   */
  userJwt?: UserJwtOptions;
  /** Model used when a request names none. */
  model?: string;
  /** @default "127.0.0.1" */
  host?: string;
  /** 0 picks a free port. @default 8787 */
  port?: number;
  /**
   * Largest request body in bytes; larger ones get 413 (after the rest, up to 4× this, is read and
   * discarded, so the client reads the answer). @default 10485760 (10 MB)
   */
  bodyLimit?: number;
  /**
   * The request headers that name a turn's session, in order; the first that holds a value decides.
   * A front-end's chat header may hold any chat id (a non-UUID one maps to a UUID v5 of it).
   * @default ["x-session-id", "x-openwebui-chat-id", "x-conversation-id"]
   */
  sessionHeaders?: readonly string[];
  /**
   * Per-user and per-API-key limits on model requests in flight and per period, counted in this
   * process; side requests are counted apart from turns. `false`: no limits.
   * @default DEFAULT_FAIR_SHARE (16 in flight and 600 a minute per user; none per key)
   */
  fairShare?: FairShareOptions | false;
  /** Replay of turns retried with the same Idempotency-Key (in this process). */
  idempotency?: IdempotencyOptions;
  /** fastify's logger option. @default false */
  logger?: FastifyServerOptions["logger"];
  /** Log a line per request and response (with a logger). @default false */
  logRequests?: boolean;
  /**
   * Which peers may name the client in `X-Forwarded-For` (fastify's `trustProxy`): `true` any, or
   * the proxies' addresses and CIDRs (`["127.0.0.1", "10.0.0.0/8"]`, also `loopback`). The request's `ip` (and the request log's `remoteAddress`) is then the client
   * behind the proxy. Off by default: a client that reaches threadkeep directly could otherwise
   * write any address into the header and into the logs. @default false
   */
  trustProxy?: boolean | string | readonly string[];
  /**
   * Memories written by the model: with `auto`, after each committed turn the server asks the model
   * (`model`, else the default model) in the background which durable facts about the user the turn
   * adds, changes or contradicts, and applies the answer. Needs an upstream. @default off
   */
  memories?: MemoryExtractionOptions;
  /** Time-outs and limits for slow and greedy clients (headers, body, idle, connections, stalled streams). */
  clients?: ClientLimits;
}

/** {@link ServerOptions.memories}. */
export interface MemoryExtractionOptions {
  mode: "auto" | "off";
  /** The model that extracts memories. @default the server's `model`, else the upstream's default */
  model?: string;
  /** Wait before retrying a failed extraction (doubled each time). @default 5000 */
  retryDelayMs?: number;
  /** At start, queue sessions active in the last day whose extraction a restart interrupted. @default true */
  resume?: boolean;
}

/** A created server. */
export interface ThreadkeepServer {
  app: FastifyInstance;
  memory: Memory;
  metrics: ServerMetrics;
  /** The background memory extraction, with `memories: { mode: "auto" }` and an upstream. */
  memoryExtractor?: MemoryExtractor;
  /** Starts listening. @returns the base URL, e.g. `http://127.0.0.1:8787`. */
  listen(): Promise<string>;
  /** Stops accepting requests, waits for those in flight, then closes the memory if the server opened it. */
  close(): Promise<void>;
}

const READY_PROBE_ID = "00000000-0000-4000-8000-000000000000";

function toUpstream(option: ServerOptions["upstream"], apiKey?: string): Upstream | undefined {
  if (!option) return undefined;
  if (typeof option === "string") return createUpstream({ baseUrl: option, apiKey });
  if ("chat" in option) return option;
  return createUpstream(option);
}

/**
 * Creates the threadkeep HTTP server: the chat proxy, the session API, health, metrics, OpenAPI.
 * @example
 * ```ts
 * import { createServer } from "threadkeep/server";
 *
 * const server = await createServer({ memory: { store: "sqlite:./data/threadkeep.db" }, upstream: "http://127.0.0.1:11434/v1", port: 8787 });
 * console.log(await server.listen()); // http://127.0.0.1:8787
 * // … await server.close();
 * ```
 */
export async function createServer(options: ServerOptions): Promise<ThreadkeepServer> {
  const ownsMemory = !(options.memory instanceof Memory);
  const memory = options.memory instanceof Memory ? options.memory : createMemory(options.memory);
  const upstream = toUpstream(options.upstream, options.upstreamKey);
  const apiKeys = toApiKeyMap(options.apiKeys);
  const authenticate = createAuthenticator(apiKeys, memory.settings.defaultUserId);
  const operatorKeys = [...(options.operatorKeys ?? [])];
  const isOperator = createOperatorCheck(operatorKeys);
  const endUsers = { userHeader: options.userHeader, userJwt: options.userJwt };
  let resolveUser: ReturnType<typeof createUserResolver>;
  let clientLimits: Required<ClientLimits>;
  try {
    clientLimits = resolveClientLimits(options.clients);
    checkTenantIds(apiKeys.size > 0 ? apiKeys.values() : [memory.settings.defaultUserId], endUsers);
    // A key that is not an API key would be an operator of nothing: a typo, said at start.
    if (operatorKeys.some((key) => !apiKeys.has(key)))
      throw new ThreadkeepError("invalid_request", "Every operator key must also be one of the API keys");
    resolveUser = createUserResolver(endUsers);
  } catch (error) {
    if (ownsMemory) await memory.close();
    throw error;
  }
  const metrics = new ServerMetrics();
  const bodyLimit = options.bodyLimit ?? 10 * 1024 * 1024;
  const connectionGuard = createConnectionGuard(clientLimits, metrics);
  const app = Fastify({
    ...connectionGuard.serverOptions,
    logger: options.logger ?? false,
    bodyLimit,
    logController: new LogController({ disableRequestLogging: !options.logRequests }),
    trustProxy: typeof options.trustProxy === "object" ? [...options.trustProxy] : (options.trustProxy ?? false),
    // A malformed or over-long URL is answered like every other bad request: an OpenAI error body.
    frameworkErrors: (error, request, reply) => sendFailure(request, reply, error, (code) => metrics.error(code)),
  });

  // Only JSON bodies: fastify's default text/plain parser would turn a wrong Content-Type into a 400.
  app.removeContentTypeParser("text/plain");
  installJsonParser(app);
  // First of the onRequest hooks: a connection past the limit is answered before any work.
  connectionGuard.install(app);
  app.decorateRequest("userId", "");
  app.decorateRequest("tenantId", "");
  app.decorateRequest("operator", false);
  const withEndUsers = hasEndUsers(endUsers);
  app.addHook("onRequest", async (request) => {
    // By the matched route, not the raw URL, so no spelling of a path slips past.
    if (request.routeOptions.url?.startsWith("/v1/") || request.routeOptions.url === MCP_PATH) {
      const tenant = authenticate(request.headers.authorization);
      request.tenantId = tenant;
      request.operator = operatorKeys.length > 0 && isOperator(request.headers.authorization);
      const user = await resolveUser(request.raw, tenant);
      request.userId = operatorUser(request.raw, { tenant, user, operator: request.operator, endUsers: withEndUsers });
    }
  });
  installBodyDrain(app, { bodyLimit });
  // JSON nested thousands deep overflows JSON.stringify wherever it goes next: refused at the door.
  app.addHook("preHandler", async (request) => {
    if (request.body !== undefined && request.body !== null) checkJson(request.body, "");
  });
  app.addHook("onResponse", async (request, reply) => {
    metrics.requests.inc({
      method: request.method,
      route: request.routeOptions.url ?? "unmatched",
      status: String(reply.statusCode),
    });
  });
  installErrorHandlers(
    app,
    (code) => metrics.error(code),
    (request, reply) => {
      // Failures before the handler (body too large, bad JSON) still echo a valid session id.
      const given = request.headers[SESSION_HEADER];
      if (request.url.startsWith("/v1/chat/") && !reply.hasHeader(SESSION_HEADER) && isValidSessionId(given)) {
        reply.header(SESSION_HEADER, given.toLowerCase());
      }
    },
  );

  const memoryExtractor =
    options.memories?.mode === "auto" && upstream
      ? new MemoryExtractor({
          memory,
          upstream,
          metrics,
          log: app.log,
          model: options.memories.model ?? options.model,
          ...(options.memories.retryDelayMs !== undefined ? { retryDelayMs: options.memories.retryDelayMs } : {}),
        })
      : undefined;
  const turnDeps = {
    memory,
    afterCommit: memoryExtractor
      ? (userId: string, sessionId: string) => memoryExtractor.schedule(userId, sessionId)
      : undefined,
    metrics,
    upstream,
    idempotency: new IdempotencyCache(options.idempotency),
    fairShare: options.fairShare === false ? undefined : new FairShare(options.fairShare ?? {}, metrics),
    defaultModel: options.model,
    sessionHeaders: options.sessionHeaders?.map((name) => name.toLowerCase()) ?? DEFAULT_SESSION_HEADERS,
    streamStallTimeoutMs: clientLimits.streamStallTimeoutMs,
  };
  registerChatCompletionRoutes(app, turnDeps);
  registerResponseRoutes(app, turnDeps);
  registerConversationRoutes(app, { memory });
  registerModelRoutes(app, { upstream });
  registerSessionRoutes(app, { memory, metrics });
  registerBranchRoutes(app, { memory, metrics });
  registerSearchRoutes(app, { memory });
  registerMemoryRoutes(app, { memory, endUsers: withEndUsers });
  registerMcpRoutes(app, { memory });
  registerSessionActions(app, { memory, metrics });
  registerInspector(app);

  addRoute(app, serviceContracts.health, async () => ({ status: "ok" }));
  addRoute(app, serviceContracts.ready, async (_request, reply) => {
    try {
      const store = await memory.store();
      await withTimeout(store.getSession(READY_PROBE_ID), 2000);
      // Reads work but turns are answered unsaved: still ready (a balancer freeing no space), and said so.
      const full = metrics.storeWrites.full;
      // Which index semantic search of a large owner uses (e.g. pgvector's HNSW or the IVF in SQL).
      const described = canStoreVectors(store) ? await store.describeVectorIndex?.().catch(() => undefined) : undefined;
      const vectorIndex = described ? { vectorIndex: described } : {};
      if (full) {
        return {
          status: "degraded",
          store: store.name,
          ...vectorIndex,
          storageFull: { since: new Date(full.since).toISOString(), error: full.error },
        };
      }
      return { status: "ok", store: store.name, ...vectorIndex };
    } catch (error) {
      const failure = toHttpFailure(error);
      return reply.code(503).send({ status: "unavailable", ...(failure.body as object) });
    }
  });
  addRoute(app, serviceContracts.metrics, async (_request, reply) =>
    reply.type("text/plain; version=0.0.4; charset=utf-8").send(metrics.render()),
  );
  addRoute(app, serviceContracts.openApi, async () => openApiDocument);

  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? 8787;
  return {
    app,
    memory,
    metrics,
    memoryExtractor,
    async listen() {
      warmUp();
      await app.listen({ host, port });
      // What a restart interrupted, in the background: listening does not wait for it.
      if (memoryExtractor && options.memories?.resume !== false) void memoryExtractor.resume();
      const address = app.server.address();
      const actualPort = typeof address === "object" && address ? address.port : port;
      return `http://${host.includes(":") ? `[${host}]` : host}:${actualPort}`;
    },
    async close() {
      await app.close();
      await memoryExtractor?.close();
      if (ownsMemory) await memory.close();
    },
  };
}

/** Loads the tokenizer now, so the first turn does not pay for it (it takes a few hundred ms). */
function warmUp(): void {
  try {
    assembleContext({
      system: [],
      history: [],
      summaries: [],
      input: [{ role: "user", content: "warm up" }],
      window: 1,
      tokenBudget: 1000,
    });
  } catch {
    // Only a head start: the first turn would hit the same error and report it properly.
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ThreadkeepError("store_unavailable", `The store did not answer within ${ms} ms`)),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
