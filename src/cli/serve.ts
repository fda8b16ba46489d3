import type { Command } from "commander";
import { describeCommand } from "./_commands.js";
import { environmentWithFile } from "./_config-file.js";
import { isStoreRefusal, isThreadkeepError, ThreadkeepError } from "../core/errors.js";
import { createUpstream } from "../llm/openai-compatible.js";
import {
  createServer,
  DEFAULT_FAIR_SHARE,
  describeIdentity,
  formatRate,
  isLoopbackHost,
  startTracing,
  type ThreadkeepServer,
  tracingConfig,
} from "../server/index.js";
import {
  addEmbeddingOptions,
  addRecallOptions,
  type RecallConfig,
  type RecallFlags,
  recallMemoryOptions,
  resolveRecallConfig,
} from "./_recall-options.js";
import { isWorker, reportListening, runPrimary, sharedStoreUrl } from "./_workers.js";
import { addClientOptions, type ClientFlags, resolveClientFlags } from "./_client-options.js";
import type { ClientLimits } from "../server/connections.js";
import {
  addStoreOptions,
  addUpstreamOptions,
  type ConfigFlags,
  resolveConfig,
  type ThreadkeepConfig,
} from "./options.js";

const PROBE_SESSION_ID = "00000000-0000-4000-8000-000000000000";

/** How often the server deletes sessions inactive past the TTL. */
const SWEEP_INTERVAL_MS = 60 * 60_000;

/** A store URL safe to print: a password in it is masked. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*:)[^@/]*@/i, "$1***@");
}

/**
 * Refuses a configuration that would expose sessions: a non-loopback address without API keys.
 * @throws ThreadkeepError `invalid_request` (exit code 2).
 */
export function checkExposure(config: Pick<ThreadkeepConfig, "host" | "apiKeys">): void {
  if (isLoopbackHost(config.host) || config.apiKeys.size > 0) return;
  throw new ThreadkeepError(
    "invalid_request",
    `Refusing to listen on ${config.host} without API keys: anyone who can reach it could read every conversation. ` +
      "Set --api-keys key1:alice,key2:bob (or THREADKEEP_API_KEYS), or listen on 127.0.0.1.",
  );
}

/**
 * Why memories would mix people: `--memories auto` off loopback behind at most one API key with no
 * end-user header, where everyone who uses the key is one user. Undefined when that is not the case.
 */
export function memoriesShared(
  config: Pick<ThreadkeepConfig, "host" | "apiKeys" | "userHeader" | "userJwt">,
  recall: Pick<RecallConfig, "memories">,
): string | undefined {
  if (
    recall.memories !== "auto" ||
    isLoopbackHost(config.host) ||
    config.apiKeys.size > 1 ||
    config.userHeader ||
    config.userJwt
  )
    return undefined;
  return (
    `--memories auto on ${config.host} behind one shared API key without --user-header: everyone who uses the key is one user, ` +
    "and the memories written about one person reach everyone's context. Set --user-header (or --user-jwt-secret) or one key per person."
  );
}

/**
 * What an API key without a user identity means off loopback: everyone who uses one key (a gateway's,
 * a team's) is one threadkeep user, with one session list, one search, one set of memories and one
 * fair-share budget. Undefined when keys are off, on loopback, or the end user is named per request.
 */
export function sharedKeyNotice(
  config: Pick<ThreadkeepConfig, "host" | "apiKeys" | "userHeader" | "userJwt" | "fairShare">,
): string | undefined {
  if (isLoopbackHost(config.host) || config.apiKeys.size === 0 || config.userHeader || config.userJwt) return undefined;
  const inFlight =
    config.fairShare.userConcurrency > 0 ? `, ${config.fairShare.userConcurrency} model requests in flight` : "";
  return (
    `on ${config.host} each API key is one threadkeep user: everyone who uses a key shares its session list, search, ` +
    `memories and fair-share budget${inFlight}. Behind a gateway that serves many people with one key (Open WebUI, LibreChat), ` +
    "name the person: --user-jwt-secret (the gateway's signed token) or --user-header X-OpenWebUI-User-Id (when only the gateway reaches threadkeep); " +
    "otherwise give each person a key of their own (--api-keys key1:alice,key2:bob)."
  );
}

/** Starts the server for a resolved configuration and prints where it listens. */
export async function startServe(
  config: ThreadkeepConfig,
  print: (line: string) => void = (l) => process.stdout.write(`${l}\n`),
  recall: RecallConfig = resolveRecallConfig({}),
  clients: ClientLimits = {},
): Promise<ThreadkeepServer> {
  checkExposure(config);
  // OTEL_* variables that ask for traces start the exporter now: a bad value fails the start.
  const stopTracing = await startTracing();
  const upstream = config.upstreamUrl
    ? createUpstream({ baseUrl: config.upstreamUrl, apiKey: config.upstreamKey, timeoutMs: config.upstreamTimeoutMs })
    : undefined;
  const server = await createServer({
    memory: {
      store: config.store,
      window: config.window,
      tokenBudget: config.tokenBudget,
      maxMessages: config.maxMessages,
      ttlMs: config.ttlMs,
      leaseTtlMs: config.leaseTtlMs,
      sweepIntervalMs: SWEEP_INTERVAL_MS,
      ...recallMemoryOptions(recall, config, upstream),
    },
    upstream,
    apiKeys: config.apiKeys,
    operatorKeys: config.operatorKeys,
    userHeader: config.userHeader,
    userJwt: config.userJwt,
    model: config.model,
    host: config.host,
    port: config.port,
    bodyLimit: config.bodyLimit,
    sessionHeaders: config.sessionHeaders,
    trustProxy: config.trustProxy,
    fairShare: config.fairShare,
    clients,
    ...(recall.memories === "auto" ? { memories: { mode: "auto" as const, model: recall.memoryModel } } : {}),
    logger: { level: process.env.THREADKEEP_LOG_LEVEL ?? "warn" },
    // A line per request at `info` (THREADKEEP_LOG_LEVEL=info); at the default `warn` none is written.
    logRequests: true,
  });
  if (stopTracing) {
    // Spans still batched are sent when the server closes.
    const close = server.close.bind(server);
    server.close = async () => {
      try {
        await close();
      } finally {
        await stopTracing().catch(() => {});
      }
    };
  }
  try {
    // Open the store now: a bad URL, a missing client or an unreadable schema fails at start, not on
    // the first request. An unreachable store is only reported: turns degrade and /readyz says so.
    const store = await server.memory.store();
    await store.getSession(PROBE_SESSION_ID).catch((error) => {
      if (!isThreadkeepError(error, "store_unavailable")) throw error;
      // A refusal (a wrong password, a missing database) needs fixing, not waiting: say so.
      const refused: boolean = isStoreRefusal(error);
      process.stderr.write(
        refused
          ? `threadkeep: error: the store refused the connection (${error.message}); turns answer 503 store_misconfigured until it is fixed\n`
          : `threadkeep: warning: the store is unreachable for now (${error.message}); serving without history\n`,
      );
    });
    const url = await server.listen();
    const shared = memoriesShared(config, recall);
    if (shared) process.stderr.write(`threadkeep: warning: ${shared}\n`);
    const notice = sharedKeyNotice(config);
    if (notice) process.stderr.write(`threadkeep: note: ${notice}\n`);
    const upstreamLabel = config.upstreamUrl ?? "none (chat answers 503 until --upstream is set)";
    const operators = config.operatorKeys.size > 0 ? ` (${config.operatorKeys.size} operator)` : "";
    const auth =
      config.apiKeys.size > 0 ? `api keys: ${config.apiKeys.size}${operators}` : "auth: none (loopback only)";
    const summaries =
      !upstream || !recall.summaries ? "off" : (recall.summaryModel ?? config.model ?? "the conversation's model");
    const embeddings = recall.embeddingModel ?? "off";
    const memories =
      !upstream || recall.memories === "off"
        ? "off"
        : `auto (${recall.memoryModel ?? config.model ?? "the upstream's default model"})`;
    const recalling = recall.recall
      ? `${recall.recallScope === "user" ? "user's sessions" : "session"}, ${recall.embeddingModel ? "hybrid" : "by words"}`
      : "off";
    const identity = describeIdentity({ userHeader: config.userHeader, userJwt: config.userJwt });
    const tracing = stopTracing ? `otlp ${tracingConfig()?.protocol}` : "off";
    print(
      `threadkeep listening on ${url}  store: ${redactUrl(config.store)}  upstream: ${upstreamLabel}  ${auth}  identity: ${identity}  summaries: ${summaries}  embeddings: ${embeddings}  recall: ${recalling}  memories: ${memories}  traces: ${tracing}`,
    );
    return server;
  } catch (error) {
    await server.close().catch(() => {});
    throw error;
  }
}

/** Adds `threadkeep serve`. */
export function register(program: Command): void {
  const command = program
    .command("serve")
    .description(describeCommand("serve"))
    .option("--host <host>", "address to listen on (env THREADKEEP_HOST; default 127.0.0.1)")
    .option("--port <n>", "port to listen on (env THREADKEEP_PORT; default 8787)")
    .option(
      "--api-keys <list>",
      "threadkeep API keys as key1:alice,key2:bob (env THREADKEEP_API_KEYS); required off loopback; key3:alice:operator makes a key an operator key, which may open any end user of its tenant",
    )
    .option(
      "--user-header <name>",
      "trust this header (e.g. X-OpenWebUI-User-Id) to name the end user behind an API key; only when nothing but the gateway reaches threadkeep (env THREADKEEP_USER_HEADER)",
    )
    .option(
      "--user-jwt-secret <secret>",
      "verify the gateway's signed end-user token (Open WebUI's FORWARD_USER_INFO_HEADER_JWT_SECRET); prefer the env THREADKEEP_USER_JWT_SECRET",
    )
    .option(
      "--user-jwt-issuer <iss>",
      "the iss the end-user token must carry (env THREADKEEP_USER_JWT_ISSUER; default open-webui)",
    )
    .option(
      "--user-jwt-header <name>",
      "the header of the end-user token (env THREADKEEP_USER_JWT_HEADER; default X-OpenWebUI-User-Jwt)",
    )
    .option(
      "--body-limit <bytes>",
      "largest request body in bytes; a larger one gets 413 once the rest (up to 4x this more) is read and dropped (env THREADKEEP_BODY_LIMIT; default 10485760)",
    )
    .option(
      "--session-headers <list>",
      "request headers that name a turn's session, first filled one wins (env THREADKEEP_SESSION_HEADERS; default x-session-id,x-openwebui-chat-id,x-conversation-id)",
    )
    .option(
      "--user-concurrency <n>",
      `model requests one user may have in flight, waiting for their session included; more get 429 too_many_concurrent_turns (env THREADKEEP_USER_CONCURRENCY; default ${DEFAULT_FAIR_SHARE.userConcurrency}; 0: none)`,
    )
    .option(
      "--user-rate <rate>",
      `model requests per user per period, e.g. 600/min or 10/s; more get 429 rate_limited (env THREADKEEP_USER_RATE; default ${formatRate(DEFAULT_FAIR_SHARE.userRate)}; off: none)`,
    )
    .option(
      "--key-concurrency <n>",
      "as --user-concurrency, for all users of one API key together (env THREADKEEP_KEY_CONCURRENCY; default none)",
    )
    .option(
      "--key-rate <rate>",
      "as --user-rate, for all users of one API key together (env THREADKEEP_KEY_RATE; default none)",
    )
    .option(
      "--refusal-delay <duration>",
      "hold a request refused by those limits this long before its 429, so a client retrying at once cannot spin (env THREADKEEP_REFUSAL_DELAY; default 1s)",
    )
    .option(
      "--trust-proxy <which>",
      "take the client's address from X-Forwarded-For when the peer is a trusted proxy: on (any peer), or the proxies' addresses/CIDRs such as 127.0.0.1,10.0.0.0/8; off by default, since a client that reaches threadkeep directly could write any address there (env THREADKEEP_TRUST_PROXY; default off)",
    )
    .option(
      "--config <file>",
      "read settings from a JSON or YAML file whose keys are these options without their dashes; flags and THREADKEEP_* variables win over it (docs/configuration.md)",
    )
    .option(
      "--workers <n>",
      "server processes sharing the port, e.g. one per core (env THREADKEEP_WORKERS; default 1); needs a sqlite:, postgres:// or redis:// store",
    );
  addStoreOptions(command);
  addUpstreamOptions(command);
  addRecallOptions(addEmbeddingOptions(command));
  addClientOptions(command);
  command.action(async (flags: ConfigFlags & RecallFlags & ClientFlags & { config?: string }) => {
    // The file sits under the environment: flags > THREADKEEP_* > --config > defaults.
    const env = await environmentWithFile(command, flags.config);
    const config = resolveConfig(flags, env);
    const recall = resolveRecallConfig(flags, env);
    const clients = resolveClientFlags(flags, env);
    if (config.workers > 1 && !isWorker()) {
      checkExposure(config);
      sharedStoreUrl(config.store);
      process.exitCode = await runPrimary(config.workers, (line) => process.stdout.write(`${line}\n`));
      return;
    }
    const server = isWorker()
      ? await startServe({ ...config, store: sharedStoreUrl(config.store) }, reportListening, recall, clients)
      : await startServe(config, undefined, recall, clients);
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      process.stdout.write(`threadkeep: ${signal}, finishing requests in flight and closing the store\n`);
      server.close().then(
        () => process.exit(0),
        (error) => {
          process.stderr.write(
            `threadkeep: shutdown failed: ${error instanceof Error ? error.message : String(error)}\n`,
          );
          process.exit(1);
        },
      );
    };
    process.once("SIGINT", () => stop("SIGINT"));
    process.once("SIGTERM", () => stop("SIGTERM"));
    // A worker whose primary is gone serves no one it was started for.
    if (isWorker()) process.once("disconnect", () => stop("primary gone"));
  });
}
