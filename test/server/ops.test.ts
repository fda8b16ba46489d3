import { afterEach, describe, expect, it } from "vitest";
import { StoreUnavailableError } from "../../src/core/errors.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { type Stack, startStack } from "./_stack.js";

let stack: Stack;
afterEach(async () => {
  await stack.close();
});

describe("health and metrics", () => {
  it("answers /healthz and /readyz without an API key", async () => {
    stack = await startStack({ apiKeys: { k: "u" } });
    expect(await (await stack.request("GET", "/healthz")).json()).toEqual({ status: "ok" });
    const ready = await stack.request("GET", "/readyz");
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: "ok", store: "memory" });
  });

  it("says on /readyz which index SQLite's semantic search of a large owner uses", async () => {
    const dir = mkdtempSync(join(tmpdir(), "threadkeep-readyz-"));
    try {
      stack = await startStack({ store: createSqliteStore({ path: join(dir, "a.db") }) });
      expect(await (await stack.request("GET", "/readyz")).json()).toEqual({
        status: "ok",
        store: "sqlite",
        vectorIndex: { kind: "ivf-sqlite-vec", build: "worker thread" },
      });
      await stack.close();
      stack = await startStack({ store: createSqliteStore({ path: join(dir, "b.db"), vectorIndex: false }) });
      expect(await (await stack.request("GET", "/readyz")).json()).toMatchObject({ vectorIndex: { kind: "exact" } });
    } finally {
      await stack.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reports 503 on /readyz while the store is unreachable", async () => {
    const store = createMemoryStore();
    const down = new Proxy(store, {
      get: (target, p) =>
        p === "getSession"
          ? () => Promise.reject(new StoreUnavailableError("connection refused"))
          : Reflect.get(target, p),
    });
    stack = await startStack({ store: down });
    const res = await stack.request("GET", "/readyz");
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: "unavailable", error: { code: "store_unavailable" } });
    expect((await stack.request("GET", "/healthz")).status).toBe(200);
  });

  it("exposes turns, latency histograms and errors as Prometheus text", async () => {
    stack = await startStack();
    await stack.client().chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });
    await stack.request("POST", "/v1/chat/completions", { headers: { "x-session-id": "bad" }, body: {} });
    const res = await stack.request("GET", "/metrics");
    expect(res.headers.get("content-type")).toContain("text/plain");
    const text = await res.text();
    expect(text).toContain('threadkeep_turns_total{outcome="ok",stream="false"} 1');
    for (const name of [
      "threadkeep_store_load_seconds",
      "threadkeep_upstream_seconds",
      "threadkeep_commit_seconds",
      "threadkeep_turn_duration_seconds",
    ]) {
      expect(text).toContain(`# TYPE ${name} histogram`);
      expect(text).toMatch(new RegExp(`${name}_bucket\\{le="\\+Inf"\\} 1`));
      expect(text).toContain(`${name}_count 1`);
    }
    expect(text).toContain('threadkeep_errors_total{code="invalid_session_id"} 1');
    expect(text).toContain('threadkeep_http_requests_total{method="POST",route="/v1/chat/completions",status="200"} 1');
  });
});
