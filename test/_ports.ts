/**
 * Free loopback ports for the servers tests start of their own (Redis, Redis Cluster, a PostgreSQL
 * primary and standby). A port found free can still be taken before the server binds it (by another
 * file starting servers at the same moment): callers start their servers again on new ports when one
 * cannot bind. The ranges below are disjoint, so that files never pick each other's ports:
 *
 * | range | who |
 * | --- | --- |
 * | 15000-16999 | PostgreSQL primary/standby pairs (`_postgres-standby.ts`) |
 * | 17100-17199, bus 27100-27199 | the Redis Cluster failover test |
 * | 17200-17299 | `test/server/redis-maxmemory.service.test.ts` |
 * | 21000-26999, bus 31000-36999 | every other `redis-server` (`_redis-server.ts`' default) |
 *
 * All of them are below Linux's ephemeral range (32768-60999, where outgoing connections' local ports
 * come from) except the default Redis Cluster bus ports, which a server binds once at its start.
 */
import { createServer } from "node:net";

/** Whether `port` can be bound on 127.0.0.1 now. */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * `count` consecutive ports of `range` (first and last port) that are free now, with the ports
 * `offset` above each (a Redis Cluster's bus ports: 10000) free too when `offset` is given.
 */
export async function freePorts(count: number, range: [number, number], offset?: number): Promise<number[]> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = range[0] + Math.floor(Math.random() * (range[1] - range[0] + 2 - count));
    const ports = Array.from({ length: count }, (_, i) => base + i);
    const all = offset === undefined ? ports : [...ports, ...ports.map((p) => p + offset)];
    if ((await Promise.all(all.map(portFree))).every(Boolean)) return ports;
  }
  throw new Error(`no ${count} free ports in ${range[0]}-${range[1]}`);
}
