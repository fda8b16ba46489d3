/**
 * Store outages under load: a TCP proxy between threadkeep and PostgreSQL (and Redis) is cut for a few
 * seconds while seven sessions run turns, then restored. Every request is answered (degraded where it
 * must be), no session stays locked, nothing acknowledged is lost, and a save whose outcome is unknown
 * says so and is stored once when retried with its Idempotency-Key.
 */
import { randomUUID } from "node:crypto";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { FullStore } from "../../src/core/types.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { createRedisStore } from "../../src/stores/redis/index.js";
import { serviceAvailable, TEST_POSTGRES_URL, TEST_REDIS_URL } from "../_services.js";
import { startTcpProxy, type TcpProxy } from "../_tcp-proxy.js";
import { until } from "../_wait.js";
import { type Stack, startStack } from "./_stack.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Backend {
  name: "postgres" | "redis";
  url: string;
  /** A store through `url` with test-sized timeouts (connect 1 s, operation 1.5 s). */
  open(url: string): FullStore;
}

/** The stores' test-sized timeouts: a connection's, and one operation's. */
const CONNECT_MS = 1_000;
const OPERATION_MS = 1_500;

const BACKENDS: Backend[] = [
  {
    name: "postgres",
    url: TEST_POSTGRES_URL,
    open: (url) => createPostgresStore({ url, connectTimeoutSeconds: CONNECT_MS / 1000, queryTimeoutMs: OPERATION_MS }),
  },
  {
    name: "redis",
    url: TEST_REDIS_URL,
    open: (url) => createRedisStore({ url, connectTimeoutMs: CONNECT_MS, commandTimeoutMs: OPERATION_MS }),
  },
];

/** Every value X-Threadkeep-Warning may carry. */
const KNOWN_WARNINGS = ["context-unavailable", "not-saved", "save-unconfirmed", "input-truncated", "history-omitted"];

interface Answer {
  session: string;
  content: string;
  status: number;
  warning: string | null;
  /** When the request was sent (Date.now()). */
  sentAt: number;
  ms: number;
}

describe.each(BACKENDS)("$name outage", (backend) => {
  let available: true | string = true;
  let proxy: TcpProxy | undefined;
  let stack: Stack | undefined;
  let direct: FullStore | undefined;

  beforeAll(async () => {
    available = await serviceAvailable(backend.name);
  });
  afterEach(async () => {
    proxy?.restore();
    await stack?.close();
    await direct?.close();
    await proxy?.close();
    stack = direct = proxy = undefined;
  });

  async function start(memoryOptions: { leaseTtlMs?: number } = {}) {
    proxy = await startTcpProxy({ host: "127.0.0.1", port: Number(new URL(backend.url).port) });
    const proxied = backend.open(proxy.url(backend.url));
    stack = await startStack({ store: proxied, memoryOptions: { turnWaitMs: 30_000, ...memoryOptions } });
    direct = backend.open(backend.url);
    return { proxy, stack, direct, proxied };
  }

  async function turn(
    s: Stack,
    session: string,
    content: string,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    const started = Date.now();
    const res = await s.request("POST", "/v1/chat/completions", {
      headers: { "x-session-id": session, ...headers },
      body: { model: "fake", messages: [{ role: "user", content }] },
    });
    await res.text();
    return {
      session,
      content,
      status: res.status,
      warning: res.headers.get("x-threadkeep-warning"),
      sentAt: started,
      ms: Date.now() - started,
    };
  }

  it("cut for 3 s under load: every request answered, no session locked after, nothing acknowledged lost", async (ctx) => {
    if (available !== true) ctx.skip(available);
    // Leases that outlive the test (the production 10 s could lapse while a loaded machine is still
    // catching up): a session that serves again after the outage was let go by its holder, not by a lapse.
    const { proxy, stack, direct, proxied } = await start({ leaseTtlMs: 120_000 });
    // A lease release that meets the outage is retried, and says so: expected here, so kept and checked.
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    stack.fake.setReply(() => ({ content: "ok", delayMs: 30 }));
    const sessions = Array.from({ length: 7 }, () => randomUUID());
    const answers: Answer[] = [];
    let running = true;
    const load = sessions.map(async (session) => {
      for (let i = 0; running; i++) answers.push(await turn(stack, session, `${session.slice(0, 8)} #${i}`));
    });
    // Each phase lasts its time and until every session had a turn sent in it answered, however slow the machine.
    const everySessionAnsweredSince = (since: number) => () =>
      sessions.every((session) => answers.some((a) => a.session === session && a.sentAt >= since));
    const phase = async (what: string, ms: number) => {
      const since = Date.now();
      await sleep(ms);
      await until(`every session had a turn answered ${what}`, everySessionAnsweredSince(since), { timeoutMs: 15_000 });
    };
    await phase("before the outage", 1_000);
    proxy.cut("stall");
    await phase("during the outage", 3_000);
    proxy.restore();
    const restoredAt = Date.now();
    // The store finds the server again by its own probe, within the connect timeout on an idle machine.
    await until("the store answers again", () => proxied.getSession(randomUUID()).then(() => true), {
      timeoutMs: 15_000,
    });
    await phase("after the outage", 1_500);
    running = false;
    await Promise.all(load);

    // Every request was answered with the reply; degraded ones say how.
    expect(answers.length).toBeGreaterThan(sessions.length * 2);
    for (const a of answers) {
      expect(a.status, JSON.stringify(a)).toBe(200);
      for (const w of a.warning?.split(", ") ?? []) expect(KNOWN_WARNINGS).toContain(w);
    }
    expect(answers.some((a) => /context-unavailable|not-saved|save-unconfirmed/.test(a.warning ?? ""))).toBe(true);

    // Every session serves normally now: one plain turn each, none waiting on a lease left from the
    // outage (such a turn would wait out turnWaitMs and fail, the leases lapsing only after the test).
    const after = await Promise.all(sessions.map((session) => turn(stack, session, `${session.slice(0, 8)} after`)));
    for (const a of after) {
      expect(a.status, JSON.stringify(a)).toBe(200);
      expect(a.warning ?? "", JSON.stringify(a)).not.toMatch(/context-unavailable|not-saved|save-unconfirmed/);
      expect(a.ms, JSON.stringify(a)).toBeLessThan(5_000);
    }
    // And it did within seconds of the restore: each session's first clean turn sent after it was
    // answered within 10 s (5 s on an idle machine; the margin is for a loaded one).
    const degraded = /context-unavailable|not-saved|save-unconfirmed/;
    for (const session of sessions) {
      const servedAt = [...answers, ...after]
        .filter((a) => a.session === session && a.sentAt >= restoredAt && !degraded.test(a.warning ?? ""))
        .map((a) => a.sentAt + a.ms);
      expect(Math.min(...servedAt) - restoredAt, `${session}: first clean turn after the restore`).toBeLessThan(10_000);
    }

    // Acknowledged turns are stored exactly once; turns reported not-saved are not stored at all.
    for (const session of sessions) {
      const stored = (await direct.getMessages(session)).filter((m) => m.role === "user").map((m) => String(m.content));
      for (const a of [...answers, ...after].filter((x) => x.session === session)) {
        const copies = stored.filter((c) => c === a.content).length;
        if (!/not-saved|save-unconfirmed/.test(a.warning ?? "")) expect(copies, a.content).toBe(1);
        else if (a.warning?.includes("not-saved")) expect(copies, a.content).toBe(0);
        else expect(copies, a.content).toBeLessThanOrEqual(1);
      }
    }
    const warned = warn.mock.calls.map(([message]) => String(message));
    warn.mockRestore();
    // Whatever was warned about was the store being away (a release retried, a background step failed).
    for (const message of warned) expect(message).toMatch(/^\[threadkeep\] .*(PostgreSQL|Redis)/);
  }, 90_000);

  it("unreachable: a turn degrades within the timeouts, and the next ones at once", async (ctx) => {
    if (available !== true) ctx.skip(available);
    const { proxy, stack } = await start();
    const session = randomUUID();
    expect((await turn(stack, session, "before")).warning).toBeNull();
    proxy.cut("stall");
    const first = await turn(stack, session, "during 1");
    const second = await turn(stack, session, "during 2");
    expect(first.status).toBe(200);
    expect(first.warning).toMatch(/^context-unavailable/);
    // Degrading as designed costs one operation's timeout, then at most the connect timeout counted
    // from it (a new connection tells an outage from a slow statement; the turn's next step waits what
    // is left of it) — 2.5 s — and the rest is refused at once. A wait per step would cost at least
    // two operation timeouts and the connect timeout (4 s). The bound sits halfway between the two: a
    // loaded machine measured 3.16 s against the 3 s once asserted here.
    expect(first.ms).toBeLessThan(OPERATION_MS + CONNECT_MS + OPERATION_MS / 2);
    expect(second.warning).toMatch(/^context-unavailable, not-saved$/);
    expect(second.ms).toBeLessThan(500);
    proxy.restore();
    await sleep(1_000);
    expect((await turn(stack, session, "after")).warning).toBeNull();
  }, 30_000);

  it("a save whose answer was lost says save-unconfirmed, and its retry stores it exactly once", async (ctx) => {
    if (available !== true) ctx.skip(available);
    const { proxy, stack, direct } = await start();
    const session = randomUUID();
    expect((await turn(stack, session, "first")).warning).toBeNull();
    // The store goes silent while the model answers: the commit is sent into the outage.
    stack.fake.setReply((body) => {
      if (body.messages.at(-1).content === "lost answer") proxy.cut("stall");
      return { content: "reply", delayMs: 100 };
    });
    const key = { "idempotency-key": randomUUID() };
    const unconfirmed = await turn(stack, session, "lost answer", key);
    expect(unconfirmed.status).toBe(200);
    expect(unconfirmed.warning).toBe("save-unconfirmed");
    proxy.restore();
    // The write that was on the wire lands now; the retry must not store the turn again.
    await sleep(1_000);
    const retry = await turn(stack, session, "lost answer", key);
    expect(retry.status).toBe(200);
    expect(retry.warning).toBeNull();
    const again = await turn(stack, session, "lost answer", key);
    expect(again.warning).toBeNull();
    const contents = (await direct.getMessages(session)).map((m) => m.content);
    expect(contents).toEqual(["first", "echo: first", "lost answer", "reply"]);
    expect(stack.fake.chatRequests()).toHaveLength(2);
  }, 30_000);
});
