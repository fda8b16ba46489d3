/**
 * `threadkeep serve --workers 2`: two server processes on one port and one SQLite file keep a
 * session's turns in order across processes.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { get, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";
import { killServeProcesses, startServe } from "./_serve-process.js";

const dir = mkdtempSync(join(tmpdir(), "threadkeep-workers-"));
afterEach(killServeProcesses);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `threadkeep serve --workers N …`; resolves with the URL it prints. */
function serveWorkers(workers: number, store: string, upstream: FakeUpstream) {
  return startServe(["--workers", String(workers), "--store", store], upstream);
}

/** GET on a new connection each time, so the cluster hands it to the next worker. */
function getFresh(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve(body));
    }).on("error", reject);
  });
}

const chat = (url: string, sessionId: string, content: string) =>
  fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": sessionId },
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content }] }),
  });

/** POST on a new connection each time (so consecutive calls reach different workers); status, headers and body. */
function postFresh(url: string, headers: Record<string, string>, body: unknown) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: any }>((resolve, reject) => {
    const req = request(
      url,
      { method: "POST", agent: false, headers: { "content-type": "application/json", ...headers } },
      (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

describe("threadkeep serve --workers", { timeout: 90_000 }, () => {
  it("refuses a store that lives in one process", async () => {
    const fake = await startFakeUpstream();
    try {
      const run = serveWorkers(2, "memory:", fake);
      expect(await run.exited).toBe(2);
      expect(run.output().stderr).toContain("--workers needs a store that several processes can share");
    } finally {
      await fake.close();
    }
  });

  // Enough turns at once that both workers take many and queue on the one session (100 took 25–90 s).
  const TURNS = 40;
  it(`keeps ${TURNS} concurrent turns on one session in order across 2 workers on one SQLite file`, async () => {
    const fake = await startFakeUpstream();
    // Each answer names its question and the answer before it: what the model saw of the last turn.
    fake.setReply((body) => {
      const messages: { role: string; content: string }[] = body.messages;
      const question = messages.at(-1)!.content;
      const previous = messages.findLast((m) => m.role === "assistant")?.content.split(" ")[0] ?? "none";
      return { content: `${question} after ${previous}`, delayMs: 1 };
    });
    const path = join(dir, "turns", "threadkeep.db");
    const run = serveWorkers(2, `sqlite:${path}`, fake);
    try {
      const url = await run.listening;
      expect(run.output().stdout).toContain("workers: 2");
      const sessionId = randomUUID();
      const replies = await Promise.all(Array.from({ length: TURNS }, (_, i) => chat(url, sessionId, `q${i}`)));
      for (const reply of replies) expect(reply.status).toBe(200);

      // Both processes served turns: each worker counts its own, and new connections go round-robin.
      // A worker is told apart by the sum of its turn durations (two workers may count as many turns).
      const counts = new Map<string, number>();
      for (let i = 0; i < 10; i++) {
        const metrics = await getFresh(`${url}/metrics`);
        const worker = /threadkeep_turn_duration_seconds_sum\S* (\S+)/.exec(metrics)?.[1] ?? "none";
        counts.set(
          worker,
          Number(/threadkeep_turns_total\{outcome="ok",stream="false"\} (\d+)/.exec(metrics)?.[1] ?? 0),
        );
      }
      expect(counts.size).toBe(2);
      expect([...counts.values()].reduce((a, b) => a + b, 0)).toBe(TURNS);

      const store = createSqliteStore({ path });
      try {
        const all = await store.getMessages(sessionId);
        expect(all.map((m) => m.seq)).toEqual(Array.from({ length: 2 * TURNS }, (_, i) => i + 1));
        expect(new Set(all.filter((m) => m.role === "user").map((m) => m.content)).size).toBe(TURNS);
        for (let i = 0; i < 2 * TURNS; i += 2) {
          expect(all[i].role).toBe("user");
          // Adjacent, and the turn saw the turn stored just before it.
          const previous = i === 0 ? "none" : String(all[i - 2].content);
          expect(all[i + 1].content).toBe(`${all[i].content} after ${previous}`);
        }
      } finally {
        await store.close();
      }
      run.child.kill("SIGTERM");
      expect(await run.exited).toBe(0);
    } finally {
      await fake.close();
    }
  });

  it("recognises an Idempotency-Key retried on the other worker: one upstream call, stored once, same answer", async () => {
    const fake = await startFakeUpstream();
    let calls = 0;
    fake.setReply(() => ({ content: `answer ${++calls}` }));
    const path = join(dir, "idempotency", "threadkeep.db");
    const run = serveWorkers(2, `sqlite:${path}`, fake);
    try {
      const url = `${await run.listening}/v1/chat/completions`;
      const sessionId = randomUUID();
      const body = { model: "m", messages: [{ role: "user", content: "book the table" }] };
      const headers = { "x-session-id": sessionId, "idempotency-key": "retry-1" };
      // Four attempts on new connections: the cluster hands them to the two workers in turn.
      const replies = [];
      for (let i = 0; i < 4; i++) replies.push(await postFresh(url, headers, body));
      for (const reply of replies) {
        expect(reply.status).toBe(200);
        expect(reply.body.choices[0].message.content).toBe("answer 1");
      }
      expect(replies.slice(1).every((r) => r.headers["idempotent-replayed"] === "true")).toBe(true);
      expect(calls).toBe(1);
      const store = createSqliteStore({ path });
      try {
        expect((await store.getMessages(sessionId)).map((m) => [m.role, m.content])).toEqual([
          ["user", "book the table"],
          ["assistant", "answer 1"],
        ]);
      } finally {
        await store.close();
      }
    } finally {
      run.child.kill("SIGTERM");
      await run.exited;
      await fake.close();
    }
  });
});
