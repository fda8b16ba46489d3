import { ThreadkeepError } from "../../core/errors.js";
import {
  clientOptions,
  clusterClient,
  type RedisClient,
  type RedisConnectionOptions,
  type RedisModule,
} from "./_client.js";
import { type RedisScript, script } from "./_scripts.js";
import { parseRedisUrl, type RedisUrl } from "./_url.js";
import { importOptional } from "../_util.js";

/** How often a silent server is probed. */
const SILENT_PROBE_MS = 250;

/** How long a write waits for its replicas' acknowledgement by default (`waitTimeoutMs`). */
export const DEFAULT_WAIT_TIMEOUT_MS = 1_000;

/** Server replies that mean "not now" rather than "your data is wrong". */
const TRANSIENT_REPLIES =
  /^(OOM|BUSY|LOADING|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|MOVED|ASK|ERR max number of clients)/;
/**
 * Replies that refuse the credentials (none given, wrong ones, a user without the rights; a long
 * command before AUTH is a protocol error): the URL needs fixing.
 */
const AUTH_REPLIES = /^(NOAUTH|WRONGPASS|NOPERM|ERR Protocol error: unauthenticated)/;

const ignore = () => {};

/** The commands the store sends that never write: they need no replica's acknowledgement. */
const READS = new Set([
  "HGET",
  "HMGET",
  "HGETALL",
  "HVALS",
  "LRANGE",
  "LLEN",
  "ZRANGE",
  "ZRANGEBYLEX",
  "ZSCORE",
  "PING",
  "SCAN",
  "HSCAN",
  "EXISTS",
]);

/**
 * Commands run in order in one script, their replies returned as EXEC returns them; ARGV holds each
 * command as its argument count followed by its arguments. The stand-in for a MULTI that Redis at its
 * maxmemory refuses to queue (even reads): a script is refused there only at its first write, before
 * anything is written.
 */
const COMMANDS = script(
  "commands",
  `local replies, at = {}, 1
while at <= #ARGV do
  local n = tonumber(ARGV[at])
  local args = {}
  for j = 1, n do args[j] = ARGV[at + j] end
  at = at + n + 1
  replies[#replies + 1] = redis.call(unpack(args))
end
return replies`,
);

/**
 * MULTI, the commands and EXEC sent as plain commands in one synchronous run, so nothing else on the
 * connection comes between them and they leave in one write: the same transaction as node-redis's
 * `multi()` at a fraction of its client CPU (its promise and tracing layers cost a hot read ~0.3× of a
 * bare LRANGE). Only on a single Redis: a cluster client routes each command by its own key. A broken
 * connection cannot split one: the client refuses instead of queueing (`disableOfflineQueue`), so it
 * rejects what it has not written, and an EXEC that reached a server without its MULTI is an error
 * reply, never another command's data. Resolves to EXEC's replies; rejects with the first error
 * reply among them, as `multi().exec()` does.
 */
function pipelinedTransaction(client: RedisClient, commands: string[][]): Promise<unknown[]> {
  // EXEC's reply, or its failure, says what became of the queued commands: their own replies are
  // "QUEUED" (or the same failure), so they are only kept from surfacing as unhandled rejections.
  // A command Redis refused to queue (OOM at maxmemory) aborts EXEC: that refusal says why.
  let refused: unknown;
  client.sendCommand(["MULTI"]).catch(ignore);
  for (const args of commands) client.sendCommand(args).catch((error: unknown) => (refused ??= error));
  return client.sendCommand(["EXEC"]).then(
    (replies) => {
      if (!Array.isArray(replies)) throw new Error(`EXEC answered ${String(replies)}`);
      for (const reply of replies) if (reply instanceof Error) throw reply;
      return replies;
    },
    (error: unknown) => {
      throw /^EXECABORT/.test(String((error as Error)?.message)) && refused !== undefined ? refused : error;
    },
  );
}

/**
 * One node-redis client, opened on first use, that never hangs a caller: every command has a reply
 * deadline, commands are refused (not queued) while the server is away, and a call arriving during
 * an outage waits at most `connectTimeoutMs` counted from the start of the outage. The client keeps
 * reconnecting with capped backoff, so the store recovers by itself when the server is back.
 */
export class RedisConnection {
  readonly #options: RedisConnectionOptions;
  readonly #url: RedisUrl;
  /** Host and port only: the URL may carry a password. */
  readonly #where: string;
  #opening: Promise<RedisClient> | undefined;
  #client: RedisClient | undefined;
  #module: RedisModule | undefined;
  /** When the current outage began (or the first connection attempt); 0 while connected. */
  #downSince = 0;
  #lastError: unknown;
  /** The server's refusal of the connection's setup (a database out of range), which reconnecting will not lift. */
  #refusal: Error | undefined;
  readonly #readyWaiters = new Set<() => void>();
  /** A second client for wake messages (a RESP2 connection that subscribes can do nothing else). */
  #subscriber: Promise<RedisClient> | undefined;
  #closed = false;
  /** When a command last went unanswered on a connected client; 0 while the server answers. */
  #silentSince = 0;
  /** The server is a Redis Cluster: a script may only touch keys of one slot. */
  readonly cluster: boolean;
  /** Replicas that acknowledge each write (`WAIT`) before it counts as done, and for how long it waits; 0: none. */
  readonly #wait: { replicas: number; timeoutMs: number };

  /** @throws `invalid_store_url` for a malformed URL, before anything connects. */
  constructor(options: RedisConnectionOptions) {
    this.#url = parseRedisUrl(options.url);
    this.#options = { ...options, url: this.#url.clientUrl };
    this.cluster = this.#url.cluster !== undefined;
    this.#where = this.#url.where;
    this.#wait = {
      replicas: options.waitReplicas ?? this.#url.waitReplicas ?? 0,
      timeoutMs: options.waitTimeoutMs ?? this.#url.waitTimeoutMs ?? DEFAULT_WAIT_TIMEOUT_MS,
    };
    if (
      !Number.isInteger(this.#wait.replicas) ||
      this.#wait.replicas < 0 ||
      !Number.isInteger(this.#wait.timeoutMs) ||
      this.#wait.timeoutMs < 1
    ) {
      throw new ThreadkeepError(
        "invalid_request",
        "waitReplicas must be a whole number ≥ 0 and waitTimeoutMs a whole number of ms ≥ 1",
      );
    }
  }

  /** Runs one command and returns its raw reply. @throws `store_unavailable`, `store_corrupt`. */
  send<T>(args: string[]): Promise<T> {
    if (this.#wait.replicas === 0 || READS.has(args[0])) {
      return this.#raw<T>(args).catch((error) => {
        throw this.#translate(error);
      });
    }
    const node = this.#nodeOf(args[1]);
    return this.#acknowledged(this.#raw<T>(args), args[1], node);
  }

  /**
   * Runs commands as one MULTI/EXEC transaction: one round trip, executed with nothing in between,
   * and cheaper on the server than a Lua script. On a cluster every key must be in `commands[0][1]`'s slot.
   * @returns each command's reply. @throws as {@link send}; an error reply of any command fails the whole call.
   */
  transaction<T extends unknown[]>(commands: string[][]): Promise<T> {
    const run = this.cluster
      ? (client: RedisClient) => {
          const multi = client.multi(commands[0][1]);
          for (const args of commands) multi.addCommand(args);
          return multi.exec();
        }
      : (client: RedisClient) => pipelinedTransaction(client, commands);
    const fallBack = (error: unknown): Promise<T> => {
      // At its maxmemory Redis queues no command of a MULTI, reads included: the same commands as one
      // script read on (and a write among them is refused before anything is written).
      if (/^(OOM|EXECABORT)/.test(String((error as Error)?.message))) {
        return this.eval<T>(
          COMMANDS,
          [commands[0][1]],
          commands.flatMap((args) => [String(args.length), ...args]),
        );
      }
      throw this.#translate(error);
    };
    if (this.#wait.replicas === 0 || commands.every((args) => READS.has(args[0])))
      return this.#raw<T>(run).catch(fallBack);
    const node = this.#nodeOf(commands[0][1]);
    return this.#acknowledged(this.#raw<T>(run).catch(fallBack), commands[0][1], node);
  }

  /** Runs a script by SHA1, loading it on the server's first NOSCRIPT. */
  eval<T>(script: RedisScript, keys: string[], args: string[]): Promise<T> {
    // Not async: every write is a script, and an async wrapper costs each one microtask turns.
    const waits = this.#wait.replicas > 0 && !script.readOnly && keys.length > 0;
    const node = waits ? this.#nodeOf(keys[0]) : undefined;
    const reply = this.#raw<T>(["EVALSHA", script.sha, String(keys.length), ...keys, ...args]).catch((error) => {
      if (!String((error as Error)?.message).startsWith("NOSCRIPT")) throw error;
      return this.#raw<T>(["EVAL", script.lua, String(keys.length), ...keys, ...args]);
    });
    if (waits) return this.#acknowledged(reply, keys[0], node);
    return reply.catch((error) => {
      throw this.#translate(error);
    });
  }

  /**
   * Every key matching the glob `match`, in batches of about `count` (SCAN; on a cluster, on each
   * master in turn). A key written during the walk may or may not be found, as SCAN guarantees.
   * The caller awaits each batch, so a long walk leaves the event loop free in between.
   * @throws as {@link send}.
   */
  async *scan(match: string, count: number): AsyncGenerator<string[]> {
    type Node = { sendCommand(args: string[]): Promise<unknown> };
    const nodes = await this.#raw<Node[]>(async (client) =>
      client.masterNodes ? client.masterNodes() : [client],
    ).catch((error) => {
      throw this.#translate(error);
    });
    for (const node of nodes) {
      let cursor = "0";
      do {
        const [next, keys] = await this.#raw<[string, string[]]>(() =>
          node.sendCommand(["SCAN", cursor, "MATCH", match, "COUNT", String(count)]),
        ).catch((error) => {
          throw this.#translate(error);
        });
        cursor = next;
        if (keys.length > 0) yield keys;
      } while (cursor !== "0");
    }
  }

  /** On a cluster, the connection to `key`'s master as the write is sent (see {@link #acknowledged}). */
  #nodeOf(key: string): Promise<unknown> | undefined {
    return this.#client?.nodeFor?.(key).catch(() => undefined);
  }

  /**
   * `reply`, once the write it answers has reached `waitReplicas` replicas: WAIT on the connection that
   * carried it (on a cluster, that of `key`'s node), which covers every write sent on it before.
   * @throws `store_unavailable` with outcome unknown when fewer replicas confirm it in time: the write
   * applied on the master, and a failover before it reaches a replica would lose it.
   */
  async #acknowledged<T>(reply: Promise<T>, key: string, nodeAtSend: Promise<unknown> | undefined): Promise<T> {
    const value = await reply.catch((error) => {
      throw this.#translate(error);
    });
    const { replicas, timeoutMs } = this.#wait;
    const args = ["WAIT", String(replicas), String(timeoutMs)];
    const acked = await this.#raw<number>(async (client) => {
      if (!client.nodeFor) return client.sendCommand(args);
      // WAIT counts the writes of the connection it is sent on: if the slot's master changed since
      // the write left (a failover), the write's fate is unknown.
      const [before, node] = await Promise.all([nodeAtSend, client.nodeFor(key)]);
      if (before !== undefined && before !== node)
        throw new Error("the slot's master changed before the write was confirmed");
      return node.sendCommand(args);
    }, timeoutMs).catch((error) => {
      throw this.#unknown(this.#translate(error));
    });
    if (Number(acked) < replicas) {
      throw this.#unknown(
        this.#unavailable(
          `Redis at ${this.#where} applied a write that ${acked} of the ${replicas} replicas it waits for acknowledged within ${timeoutMs} ms (wait=${replicas}): a failover may lose it`,
          null,
        ),
      );
    }
    return value;
  }

  /**
   * Delivers messages of a sharded channel to `listener`. Best effort and never blocking: messages are
   * hints that save a poll, so a subscription that fails (or lags) only makes waiters a little slower.
   */
  listen(channel: string, listener: (message: string) => void): void {
    this.#subscribed()
      .then((subscriber) => subscriber.sSubscribe(channel, listener))
      .catch((error) => this.#report(error));
  }

  /** Stops {@link listen}ing to a channel. */
  unlisten(channel: string): void {
    this.#subscribed()
      .then((subscriber) => subscriber.sUnsubscribe(channel))
      .catch((error) => this.#report(error));
  }

  /** Closes the client (waiting for replies in flight when connected). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const wake of this.#readyWaiters) wake();
    const subscriber = await this.#subscriber?.catch(() => undefined);
    if (subscriber?.isOpen && subscriber !== this.#client) subscriber.destroy();
    const client = this.#client ?? (await this.#opening?.catch(() => undefined));
    if (!client) return;
    if (client.isReady) await client.close().catch(() => client.destroy());
    else if (client.isOpen) client.destroy();
  }

  /** `extraMs`: how long the command may block on the server by design (WAIT's timeout), on top of the reply deadline. */
  #raw<T>(args: string[] | ((client: RedisClient) => Promise<unknown>), extraMs = 0): Promise<T> {
    // A server that stopped answering (connected but silent): as in a disconnect, a call waits at most
    // the connect timeout counted from the start of the silence, then fails at once until it answers.
    let ms = this.#options.commandTimeoutMs + extraMs;
    if (this.#silentSince) {
      const left = this.#silentSince + this.#options.connectTimeoutMs - Date.now();
      if (left <= 0) return Promise.reject(this.#unavailable(`Redis at ${this.#where} is not answering`));
      ms = Math.min(ms, left);
    }
    const client = this.#client;
    // The hot path stays synchronous up to sendCommand, so calls reach the server in call order.
    if (client?.isReady) return this.#timed<T>(client, args, ms);
    return this.#whenReady().then((ready) => this.#timed<T>(ready, args, ms));
  }

  #timed<T>(client: RedisClient, args: string[] | ((client: RedisClient) => Promise<unknown>), ms: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      // node-redis times out only commands not yet written; a server that stops answering needs this.
      const timer = setTimeout(() => {
        this.#silent(client);
        reject(this.#unknown(this.#unavailable(`Redis at ${this.#where} did not answer within ${ms} ms`)));
      }, ms);
      (typeof args === "function" ? args(client) : client.sendCommand(args)).then(
        (reply) => {
          clearTimeout(timer);
          this.#silentSince = 0;
          resolve(reply as T);
        },
        (error) => {
          clearTimeout(timer);
          // A reply, or a refusal while offline, says what happened; a connection that broke with the
          // command on it does not: it may have run.
          const m = this.#module;
          const known =
            !m ||
            error instanceof m.ErrorReply ||
            error instanceof m.ClientOfflineError ||
            error instanceof m.ClientClosedError;
          reject(known ? error : this.#unknown(this.#translate(error)));
        },
      );
    });
  }

  async #whenReady(): Promise<RedisClient> {
    if (this.#closed) throw this.#unavailable("The redis store is closed");
    const client = this.#client ?? (await this.#open());
    if (client.isReady) return client;
    const waitMs = this.#downSince + this.#options.connectTimeoutMs - Date.now();
    if (waitMs > 0 && !this.#refusal) await this.#readyWithin(waitMs);
    if (this.#closed) throw this.#unavailable("The redis store is closed");
    if (client.isReady) return client;
    if (this.#refusal) throw this.#refused(this.#refusal);
    throw this.#unavailable(`Redis at ${this.#where} is unreachable`);
  }

  #open(): Promise<RedisClient> {
    this.#opening ??= (async () => {
      const redis = await importOptional(() => import("redis"), "redis", "redis://");
      if (this.#closed) throw this.#unavailable("The redis store is closed");
      const cluster = this.#url.cluster;
      const client: RedisClient = cluster
        ? clusterClient(redis, cluster, this.#options)
        : redis.createClient(clientOptions(this.#options));
      // Without an 'error' listener an outage would crash the process; calls report it instead.
      client.on("error", (error: Error) => {
        this.#lastError = error;
        if (!this.#downSince) this.#downSince = Date.now();
        // The server answered the connection's setup with an error that retrying will not change:
        // calls fail at once, saying so, instead of waiting out the connect timeout as in an outage.
        this.#refusal = error instanceof redis.ErrorReply && !TRANSIENT_REPLIES.test(error.message) ? error : undefined;
        // Without a password, the setup's first command (SELECT) gets NOAUTH; a wrong one, WRONGPASS.
        if (this.#refusal) for (const wake of this.#readyWaiters) wake();
        this.#report(error);
      });
      client.on("ready", () => {
        this.#downSince = 0;
        this.#refusal = undefined;
        for (const wake of this.#readyWaiters) wake();
      });
      this.#module = redis;
      this.#downSince = Date.now();
      this.#client = client;
      // Resolves on the first ready; rejects only when closed. Outages in between are retried.
      client.connect().catch((error: unknown) => {
        this.#lastError = error;
      });
      return client;
    })();
    return this.#opening;
  }

  #subscribed(): Promise<RedisClient> {
    this.#subscriber ??= this.#open().then((main) => {
      if (this.#closed) throw this.#unavailable("The redis store is closed");
      // duplicate() reuses the client class; a second createClient() would build it again, blocking
      // the event loop for ~100 ms. Subscriptions may queue while disconnected: node-redis sends
      // them, and restores them, on connect.
      const subscriber = main.duplicate({ disableOfflineQueue: false });
      if (subscriber === main) return main;
      subscriber.on("error", (error) => this.#report(error));
      subscriber.connect().catch(() => {});
      return subscriber;
    });
    return this.#subscriber;
  }

  /** Passes a background error on, unless it only says that this connection is being closed. */
  #report(error: Error): void {
    if (!this.#closed) this.#options.onError?.(error);
  }

  #readyWithin(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#readyWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#readyWaiters.add(done);
    });
  }

  /** Enters the silent state and probes with PING until the server answers again. */
  #silent(client: RedisClient): void {
    if (this.#silentSince || this.#closed) return;
    this.#silentSince = Date.now();
    const probe = () => {
      if (this.#closed) return;
      let timer: NodeJS.Timeout | undefined;
      const limit = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("probe timed out")), this.#options.commandTimeoutMs);
      });
      Promise.race([client.sendCommand(["PING"]), limit])
        .then(
          () => {
            this.#silentSince = 0;
          },
          () => setTimeout(probe, SILENT_PROBE_MS).unref(),
        )
        .finally(() => clearTimeout(timer));
    };
    setTimeout(probe, SILENT_PROBE_MS).unref();
  }

  /** The same failure, marked as one whose command may or may not have run. */
  #unknown(error: ThreadkeepError): ThreadkeepError {
    return new ThreadkeepError(error.code, error.message, { cause: error.cause, details: { outcome: "unknown" } });
  }

  /** A refusal of the connection's setup, as a store error that is not an outage (`isStoreRefusal`). */
  #refused(error: Error): ThreadkeepError {
    const database = this.#url.database;
    const hint =
      database !== undefined && /DB index/i.test(error.message)
        ? ` (the URL selects database ${database}; a server has databases 0-15 unless its "databases" setting says otherwise)`
        : AUTH_REPLIES.test(error.message)
          ? " (check the user name and password in the store URL: redis://[user]:password@host:port, percent-encoded)"
          : "";
    return new ThreadkeepError(
      "store_unavailable",
      `Redis at ${this.#where} refused the connection: ${error.message}${hint}`,
      {
        cause: error,
        details: { refused: true },
      },
    );
  }

  #unavailable(message: string, cause: unknown = this.#lastError): ThreadkeepError {
    return new ThreadkeepError("store_unavailable", message, cause === undefined || cause === null ? {} : { cause });
  }

  #translate(error: unknown): ThreadkeepError {
    if (error instanceof ThreadkeepError) return error;
    const message = String((error as Error)?.message ?? error);
    if (this.#module && error instanceof this.#module.ErrorReply && AUTH_REPLIES.test(message))
      return this.#refused(error);
    if (this.#module && error instanceof this.#module.ErrorReply && !TRANSIENT_REPLIES.test(message)) {
      // WRONGTYPE or a script tripping over a malformed value: the keys hold something unexpected.
      return new ThreadkeepError("store_corrupt", `Redis refused an operation on session data: ${message}`, {
        cause: error,
      });
    }
    // At its maxmemory with noeviction, Redis refuses the write before running it (a script's first
    // write, or a command queued in MULTI): nothing is written, and the same write succeeds once memory frees.
    if (this.#module && error instanceof this.#module.ErrorReply && /^OOM/.test(message)) {
      return new ThreadkeepError("store_unavailable", `Redis at ${this.#where} is out of memory: ${message}`, {
        cause: error,
        details: { storageFull: true },
      });
    }
    return this.#unavailable(`Redis at ${this.#where} failed: ${message}`, error);
  }
}
