/**
 * The test helper that starts `redis-server` processes (the Redis Cluster and password tests use it):
 * a port found free but taken before the server binds it makes it start again on new ports, instead
 * of failing the run.
 */
import { createConnection, createServer, type Server } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { type RedisServers, redisServerAvailable, startRedisServers } from "../_redis-server.js";

const available = redisServerAvailable("the redis-server helper test");
if (available !== true) console.warn(`skipping the redis-server helper test: ${available}`);

function listen(port = 0): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
}

const portOf = (server: Server) => (server.address() as { port: number }).port;

function ping(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: "127.0.0.1", port }, () => socket.write("PING\r\n"));
    socket.once("data", (data) => {
      resolve(String(data).trim());
      socket.destroy();
    });
    socket.once("error", reject);
  });
}

describe.skipIf(available !== true)("startRedisServers", () => {
  let taken: Server | undefined;
  let servers: RedisServers | undefined;
  afterAll(async () => {
    await servers?.stop();
    await new Promise((resolve) => (taken ? taken.close(resolve) : resolve(undefined)));
  });

  it("starts again on new ports when a port is taken between the check and the start", async () => {
    taken = await listen();
    const picks: number[][] = [];
    servers = await startRedisServers(1, () => ["--save", "", "--appendonly", "no"], {
      pick: async () => {
        // First the taken port (as if another process got it first), then one free now.
        if (picks.length === 0) return (picks[picks.length] = [portOf(taken!)]);
        const probe = await listen();
        const port = portOf(probe);
        await new Promise((resolve) => probe.close(resolve));
        return (picks[picks.length] = [port]);
      },
    });
    expect(picks).toHaveLength(2);
    expect(servers.ports).toEqual(picks[1]);
    expect(await ping(servers.ports[0])).toBe("+PONG");
  }, 30_000);
});
