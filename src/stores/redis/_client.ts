import type { RedisClusterSeeds } from "./_url.js";

export type RedisModule = typeof import("redis");

/** How the Redis store talks to its server. */
export interface RedisConnectionOptions {
  /** `redis://…`, `rediss://…`, or `redis+cluster://host:port,host:port` (`rediss+cluster://` with TLS) for a Redis Cluster. */
  url: string;
  commandTimeoutMs: number;
  connectTimeoutMs: number;
  maxReconnectDelayMs: number;
  onError?: (error: Error) => void;
  /** Replicas that acknowledge each write (`WAIT`); the URL's `?wait=` when not given. */
  waitReplicas?: number;
  /** Longest wait for those acknowledgements; the URL's `?wait_timeout=` when not given. */
  waitTimeoutMs?: number;
}

/** The part of a node-redis client this store uses. */
export interface RedisClient {
  readonly isReady: boolean;
  readonly isOpen: boolean;
  sendCommand(args: string[]): Promise<unknown>;
  /**
   * On a cluster, the connection to the master of `key`'s slot, for a command that must go there
   * and nowhere else (WAIT: the cluster client would send it to every master).
   */
  nodeFor?(key: string): Promise<{ sendCommand(args: string[]): Promise<unknown> }>;
  /** On a cluster, a connection to each master, for a command every master must answer for its own keys (SCAN). */
  masterNodes?(): Promise<{ sendCommand(args: string[]): Promise<unknown> }[]>;
  /** A MULTI/EXEC transaction (on a cluster, on the node of `routing`). */
  multi(routing?: string): RedisTransaction;
  connect(): Promise<unknown>;
  close(): Promise<void>;
  destroy(): void;
  on(event: "error", listener: (error: Error) => void): unknown;
  on(event: "ready", listener: () => void): unknown;
  sSubscribe(channel: string, listener: (message: string) => void): Promise<void>;
  sUnsubscribe(channel: string): Promise<void>;
  duplicate(overrides: { disableOfflineQueue: boolean }): RedisClient;
}

/** The part of a node-redis MULTI this store uses. */
export interface RedisTransaction {
  addCommand(args: string[]): unknown;
  exec(): Promise<unknown[]>;
}

/** How soon after a cluster node starts reconnecting the client looks for a new slot map. */
const TOPOLOGY_REFRESH_DELAY_MS = 250;

/** What the client options are made of. */
type ClientSettings = Pick<RedisConnectionOptions, "url" | "connectTimeoutMs" | "maxReconnectDelayMs">;

/** The key a command is routed by in a cluster: the first key of a script, else the command's first argument. */
function routingKey(args: string[]): string | undefined {
  const command = args[0]?.toUpperCase();
  if (command === "EVALSHA" || command === "EVAL") return Number(args[2]) > 0 ? args[3] : undefined;
  return args[1];
}

/**
 * A Redis Cluster client behind the same face as a single client: each command goes to the node
 * owning its first key (a session's keys share one hash tag, so each script runs on one node), and
 * sharded wake channels are subscribed on the channel's node by the cluster client itself.
 */
export function clusterClient(redis: RedisModule, seeds: RedisClusterSeeds, options: ClientSettings): RedisClient {
  const { url: _url, ...defaults } = clientOptions(options);
  const cluster = redis.createCluster({
    rootNodes: seeds.rootNodes,
    defaults: { ...defaults, username: seeds.username, password: seeds.password },
    RESP: 2,
    useReplicas: false,
    commandOptions: { timeout: 0 },
    // A node that went away is retried every second at most (`maxReconnectDelayMs`); each retry past
    // this delay reads the slot map anew from the nodes still there, so the slots of a master that
    // failed over are found on its promoted replica about a second after the promotion (the client's
    // default, 5 s, would keep them failing that much longer). A master that dies takes its pending
    // commands with it, and the client would never be told MOVED for them.
    topologyRefreshOnReconnectionAttemptStrategy: TOPOLOGY_REFRESH_DELAY_MS,
  });
  const face: RedisClient = {
    get isReady() {
      return cluster.isReady;
    },
    get isOpen() {
      return cluster.isOpen;
    },
    sendCommand: (args) => cluster.sendCommand(routingKey(args), false, args),
    nodeFor: (key) => cluster.getNodeClientForKey(key, false),
    masterNodes: () => Promise.all(cluster.masters.map((master) => cluster.nodeClient(master))),
    multi: (routing) => {
      const multi = cluster.multi(routing);
      return { addCommand: (args: string[]) => multi.addCommand(routing, false, args), exec: () => multi.exec() };
    },
    connect: () => cluster.connect(),
    close: () => cluster.close(),
    destroy: () => cluster.destroy(),
    on: (event: "error" | "ready", listener: ((error: Error) => void) | (() => void)) => {
      // The cluster says "connect" once its slots are known; a node's failure is a "node-error".
      if (event === "ready") cluster.on("connect", listener as () => void);
      else {
        cluster.on("error", listener);
        cluster.on("node-error", listener);
      }
      return face;
    },
    sSubscribe: (channel, listener) => cluster.sSubscribe(channel, listener),
    sUnsubscribe: (channel) => cluster.sUnsubscribe(channel),
    // The cluster client subscribes on connections of its own, so it can serve as its own subscriber.
    duplicate: () => face,
  };
  return face;
}

/** The node-redis client options of a connection. */
export function clientOptions(options: ClientSettings) {
  const { url, connectTimeoutMs, maxReconnectDelayMs } = options;
  return {
    url,
    // Flat RESP2 replies: the store reads arrays, strings and integers only.
    RESP: 2 as const,
    // Refuse instead of queueing while disconnected: an outage must surface, not pile up.
    disableOfflineQueue: true,
    // No node-redis command timeout: it covers only commands not yet written, and costs every command
    // an AbortSignal.timeout (a DOMException and two listeners: ~10% of a store call's client CPU). The
    // connection's own reply deadline covers every command, written or not (`redis/_connection.ts`).
    commandOptions: { timeout: 0 },
    socket: {
      connectTimeout: connectTimeoutMs,
      reconnectStrategy: (retries: number) =>
        Math.min(50 * 2 ** Math.min(retries, 10), maxReconnectDelayMs) + Math.floor(Math.random() * 50),
    },
  };
}
