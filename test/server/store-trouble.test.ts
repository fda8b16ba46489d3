import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { StoreUnavailableError, ThreadkeepError } from "../../src/core/errors.js";
import type { FullStore } from "../../src/core/types.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { chat, errorOf, metricValue } from "./_error-helpers.js";
import { type Stack, startStack } from "./_stack.js";

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** A real memory store whose named methods fail with store_unavailable while listed in `failing`. */
function flakyStore(
  makeError: (method: string) => Error = (method) => new StoreUnavailableError(`${method} failed (test)`),
): { store: FullStore; failing: Set<string> } {
  const inner = createMemoryStore();
  const failing = new Set<string>();
  const store = new Proxy(inner, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (failing.has(String(property))) return Promise.reject(makeError(String(property)));
        return value.apply(target, args);
      };
    },
  });
  return { store, failing };
}

describe("store trouble", () => {
  it("goes on without history when the store is down while loading (X-Threadkeep-Warning: context-unavailable)", async () => {
    const { store, failing } = flakyStore();
    stack = await startStack({ store });
    const id = randomUUID();
    await stack.client().chat.completions.create(chat("remember me"), { headers: { "X-Session-ID": id } });
    failing.add("getSession").add("getMessages");
    const { data, response } = await stack
      .client()
      .chat.completions.create(
        {
          model: "m",
          messages: [
            { role: "system", content: "sys" },
            { role: "user", content: "now" },
          ],
        },
        { headers: { "X-Session-ID": id } },
      )
      .withResponse();
    expect(data.choices[0].message.content).toBe("echo: now");
    // The save is one owner-scoped append that reads nothing first, so the turn is still stored.
    expect(response.headers.get("x-threadkeep-warning")).toBe("context-unavailable");
    expect(response.headers.get("x-session-id")).toBe(id);
    expect(stack.fake.chatRequests()[1].body.messages).toEqual([
      { role: "system", content: "sys" },
      { role: "user", content: "now" },
    ]);
    expect(await metricValue(stack, 'threadkeep_errors_total{code="context_unavailable"}')).toBe(1);
  });

  it("answers without history when the session's stored data cannot be read (store_corrupt)", async () => {
    const { store, failing } = flakyStore(
      (method) => new ThreadkeepError("store_corrupt", `${method}: unreadable (test)`),
    );
    stack = await startStack({ store });
    const id = randomUUID();
    await stack.client().chat.completions.create(chat("one"), { headers: { "X-Session-ID": id } });
    failing.add("getMessages");
    const { data, response } = await stack
      .client()
      .chat.completions.create(chat("two"), { headers: { "X-Session-ID": id } })
      .withResponse();
    expect(response.status).toBe(200);
    expect(data.choices[0].message.content).toBe("echo: two");
    expect(response.headers.get("x-threadkeep-warning")).toBe("context-unavailable");
    expect(stack.fake.chatRequests()[1].body.messages).toEqual([{ role: "user", content: "two" }]);
  });

  it("stores the turn when only the history read failed", async () => {
    const { store, failing } = flakyStore();
    stack = await startStack({ store });
    const id = randomUUID();
    await stack.client().chat.completions.create(chat("one"), { headers: { "X-Session-ID": id } });
    failing.add("getMessages");
    const { response } = await stack
      .client()
      .chat.completions.create(chat("two"), { headers: { "X-Session-ID": id } })
      .withResponse();
    expect(response.headers.get("x-threadkeep-warning")).toBe("context-unavailable");
    failing.clear();
    expect((await stack.memory.getMessages(id)).map((m) => m.content)).toEqual([
      "one",
      "echo: one",
      "two",
      "echo: two",
    ]);
  });

  it("returns the reply with X-Threadkeep-Warning: not-saved when the store is down while saving", async () => {
    const { store, failing } = flakyStore();
    stack = await startStack({ store });
    const id = randomUUID();
    await stack.client().chat.completions.create(chat("one"), { headers: { "X-Session-ID": id } });
    failing.add("appendMessages");
    const { data, response } = await stack
      .client()
      .chat.completions.create(chat("two"), { headers: { "X-Session-ID": id } })
      .withResponse();
    expect(data.choices[0].message.content).toBe("echo: two");
    expect(response.headers.get("x-threadkeep-warning")).toBe("not-saved");
    failing.clear();
    expect(await stack.memory.getMessages(id)).toHaveLength(2);
  });

  it("says not-saved at the end of a stream whose turn could not be saved", async () => {
    const { store, failing } = flakyStore();
    stack = await startStack({ store });
    failing.add("appendMessages");
    const res = await stack.request("POST", "/v1/chat/completions", { body: { ...chat("s"), stream: true } });
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(text).toContain(": x-threadkeep-warning: not-saved");
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
  });

  it("runs the turn without the lease when the store cannot grant it", async () => {
    const { store, failing } = flakyStore();
    stack = await startStack({ store });
    failing.add("acquireLease");
    const { data, response } = await stack.client().chat.completions.create(chat("x")).withResponse();
    expect(data.choices[0].message.content).toBe("echo: x");
    expect(response.headers.get("x-threadkeep-warning")).toBeNull();
    failing.clear();
    expect(await stack.memory.getMessages(response.headers.get("x-session-id") as string)).toHaveLength(2);
  });

  it("answers 503 store_unavailable on the session API when the store is down", async () => {
    const { store, failing } = flakyStore();
    stack = await startStack({ store });
    failing.add("listSessions");
    const res = await stack.request("GET", "/v1/sessions");
    expect(res.status).toBe(503);
    expect(await errorOf(res)).toMatchObject({ code: "store_unavailable", type: "server_error" });
  });

  it("answers an unexpected failure with an opaque 500 internal_error", async () => {
    const { store } = flakyStore();
    (store as unknown as { listSessions: () => never }).listSessions = () => {
      throw new TypeError("secret internals");
    };
    stack = await startStack({
      store: new Proxy(store, {
        get: (t, p) =>
          p === "listSessions" ? () => Promise.reject(new TypeError("secret internals")) : Reflect.get(t, p),
      }),
    });
    const res = await stack.request("GET", "/v1/sessions");
    expect(res.status).toBe(500);
    const body = await errorOf(res);
    expect(body).toMatchObject({ code: "internal_error", type: "server_error" });
    expect(JSON.stringify(body)).not.toContain("secret");
  });
});
