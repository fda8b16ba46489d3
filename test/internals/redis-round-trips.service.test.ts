/**
 * What a proxied chat turn sends to Redis, counted by the server itself (MONITOR) while a real
 * `threadkeep serve` (default settings: summaries on, compacting in the background) answers a thin
 * client's turn on an existing session: one script opens the turn (lease, session, window, summaries,
 * state) and one commits it (append, activity, indexes, lease release). On a Redis Cluster the
 * session indexes live in other slots than the session, so they follow the commit in a third step.
 */
import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { WRITE } from "../../src/stores/redis/_history.js";
import * as L from "../../src/stores/redis/_lease-scripts.js";
import * as S from "../../src/stores/redis/_scripts.js";
import { TURN_OPEN } from "../../src/stores/redis/_turn.js";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";
import { clusterAvailable, type RedisCluster, startRedisCluster } from "../_redis-cluster.js";
import { serviceAvailable, TEST_REDIS_URL } from "../_services.js";
import { killServeProcesses, startServe } from "../server/_serve-process.js";

const redisUp = await serviceAvailable("redis");
const clusterUp = clusterAvailable();
const SCRIPT_NAMES = new Map(
  [
    TURN_OPEN,
    WRITE,
    L.LEASE_POLL,
    L.LEASE_RELEASE,
    L.LEASE_RENEW,
    S.USER_INDEX,
    S.GLOBAL_INDEX,
    S.GET_STATE,
    S.OWNED_RANGE,
  ].map((s) => [s.sha, s.name]),
);

/** One command a client sent, as MONITOR shows it: `<time> [<db> <addr>] "CMD" "arg" …`. */
interface Sent {
  addr: string;
  line: string;
  /** The command, or the script's name for EVALSHA. */
  name: string;
  /** When the server ran it (MONITOR's timestamp, µs since the epoch). */
  at: number;
}

/** Watches every command sent to the given Redis servers (scripts' own calls left out). */
async function monitor(urls: string[]) {
  const sent: Sent[] = [];
  const clients = await Promise.all(
    urls.map(async (url) => {
      const client = createClient({ url });
      await client.connect();
      await client.monitor((line: string) => {
        const match = /^(\d+)\.(\d{6}) \[\d+ ([^\]]+)\] "([^"]+)"(?: "([^"]+)")?/.exec(line);
        if (!match || match[3] === "lua") return;
        const [, seconds, micros, addr, command, first] = match;
        const name =
          command.toUpperCase() === "EVALSHA" ? (SCRIPT_NAMES.get(first) ?? `script ${first}`) : command.toUpperCase();
        sent.push({ addr: `${url} ${addr}`, line, name, at: Number(seconds) * 1e6 + Number(micros) });
      });
      return client;
    }),
  );
  return {
    sent,
    /**
     * What the servers ran, in the order they ran it. Each server's lines arrive on a connection of
     * their own, in that server's order, but the test process reads the connections in whatever order
     * they become readable: on a busy machine a second node's line (the index update that follows the
     * commit) can be read before the first node's (the commit). The servers share this machine's
     * clock, and a node logs a command once it ran (Redis 7), so the timestamps give the real order.
     */
    ordered: () => [...sent].sort((a, b) => a.at - b.at),
    close: () => Promise.all(clients.map((c) => c.destroy())),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  killServeProcesses();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * Runs two turns to create and warm a session through `serve --store <store>`, then one more; returns
 * the names of what the serve process sent during that last turn (and the background work after it).
 */
async function commandsOfOneTurn(store: string, monitored: string[]): Promise<string[]> {
  const fake: FakeUpstream = await startFakeUpstream();
  cleanups.push(() => fake.close());
  const url = await startServe(["--store", store], fake).listening;
  const watch = await monitor(monitored);
  cleanups.push(watch.close);
  const session = randomUUID();
  const chat = async (content: string) => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": session },
      body: JSON.stringify({ model: "fake-model", messages: [{ role: "user", content }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-threadkeep-warning")).toBeNull();
    await res.text();
  };
  await chat("one");
  await chat("two");
  // Background compaction (summaries are on) settles before the counted turn.
  await sleep(500);
  // The serve process's connections: those that sent commands naming the session.
  const ours = new Set(watch.sent.filter((s) => s.line.includes(session)).map((s) => s.addr));
  // The servers run on this machine's clock: what they ran from now on is the counted turn's.
  const mark = Date.now() * 1000;
  await chat("three");
  // Room for background work after the turn to show up (it would fail the exact lists below).
  await sleep(500);
  const turn = watch.ordered().filter((s) => s.at >= mark && ours.has(s.addr));
  // The session received the turn (so the counted commands did the work).
  expect(
    fake
      .chatRequests()
      .at(-1)
      ?.body.messages.map((m: { content: string }) => m.content),
  ).toEqual(["one", "echo: one", "two", "echo: two", "three"]);
  return turn.map((s) => s.name);
}

describe.skipIf(redisUp !== true)("a proxied turn on Redis", { timeout: 60_000 }, () => {
  it("costs two round trips: one script opens the turn, one commits it and releases the lease", async () => {
    const names = await commandsOfOneTurn(TEST_REDIS_URL, [TEST_REDIS_URL]);
    expect(names).toEqual(["turn-open", "history-write"]);
  });
});

describe.skipIf(clusterUp !== true)("a proxied turn on a Redis Cluster", { timeout: 60_000 }, () => {
  let cluster: RedisCluster | undefined;
  afterAll(async () => cluster?.stop());

  it("opens and commits in one script each; the indexes (other slots) follow the commit", async () => {
    cluster = await startRedisCluster();
    const names = await commandsOfOneTurn(
      cluster.url,
      cluster.ports.map((p) => `redis://127.0.0.1:${p}`),
    );
    expect(names.slice(0, 2)).toEqual(["turn-open", "history-write"]);
    expect(names.slice(2).sort()).toEqual(["global-index", "user-index"]);
  });
});
