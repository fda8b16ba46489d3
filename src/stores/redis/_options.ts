/** Options of {@link createRedisStore}. */
export interface RedisStoreOptions {
  /**
   * `redis://[[user][:password]@]host[:port][/db]` or `rediss://…`; for a Redis Cluster,
   * `redis+cluster://[[user]:password@]host:port,host:port` (any reachable nodes: the rest are discovered).
   */
  url: string;
  /**
   * Sessions inactive this long expire by themselves: every key of a session expires at
   * `lastActivityAt + ttlMs`, moved on every append and touch. 0 keeps sessions until deleted or
   * `expire()`d. @default 604800000 (7 days)
   */
  ttlMs?: number;
  /** Prepended to every key, so several applications (or test files) can share one server. @default "threadkeep:" */
  keyPrefix?: string;
  /** Longest wait for one reply before the call fails with `store_unavailable`. @default 5000 */
  commandTimeoutMs?: number;
  /**
   * Longest wait for a (re)connection, counted from the start of an outage; after it, calls fail with
   * `store_unavailable` at once until the server is back. @default 2000
   */
  connectTimeoutMs?: number;
  /** Longest pause between reconnection attempts (the backoff doubles from 50 ms). @default 1000 */
  maxReconnectDelayMs?: number;
  /**
   * Replicas that must acknowledge each write before it counts as done (Redis `WAIT` after the write,
   * on the master that applied it). Redis replicates asynchronously: without this, a write the master
   * acknowledged and then lost in a crash, before any replica received it, is gone after the
   * replica's promotion. With it, such a write fails instead (`store_unavailable`, outcome unknown: it
   * applied on the master), and a write that succeeded survives the failover of its master. Costs each
   * write one more round trip (master → replica → master), and a master whose replicas are away
   * refuses every write for `waitTimeoutMs` each. URL: `?wait=N`. @default 0 (the URL's, else none)
   */
  waitReplicas?: number;
  /** Longest wait for the replicas' acknowledgement of one write (`waitReplicas`). URL: `?wait_timeout=MS`. @default 1000 */
  waitTimeoutMs?: number;
  /** Receives connection errors (the client reconnects by itself; calls report outages as errors). @default ignored */
  onError?: (error: Error) => void;
  /**
   * Receives warnings: a session index update that failed after its write applied (the write still
   * succeeds; the update is retried in the background). @default console.warn
   */
  onWarning?: (message: string) => void;
}
