/**
 * Every route of the OpenAPI document (enumerated from it, so a new route is covered by itself), sent
 * with each client's HTTP habits (test/fixtures/clients/http-habits.ts: default and X-Stainless-*
 * headers, a JSON content type on bodyless requests, Content-Length: 0, Expect: 100-continue, chunked
 * bodies, charset variants) over a real socket. Each is answered as the same request without those
 * habits: same status, same kind of body, same error code; bodyless requests succeed as they do plain.
 */
import { randomUUID } from "node:crypto";
import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openApiDocument } from "../../src/server/openapi/index.js";
import { HTTP_HABITS, type HttpHabits } from "../fixtures/clients/http-habits.js";
import { registeredRoutes } from "./_routes.js";
import { type Stack, startStack } from "./_stack.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ model: "fake-model" });
});
afterAll(() => stack.close());

/** A request of a route, before any habit is applied. */
interface Plain {
  method: string;
  path: string;
  body?: string;
  /** Headers the route itself needs (MCP's Accept): kept over a habit's. */
  headers?: Record<string, string>;
}

interface Answer {
  status: number;
  type: string;
  text: string;
}

/** Sends over a fresh request on 127.0.0.1, plain (no habits) or with a client's habits. */
function send(plain: Plain, habits?: HttpHabits): Promise<Answer> {
  const url = new URL(plain.path, stack.url);
  const headers: Record<string, string> = {
    ...(habits ? { ...habits.headers, Authorization: "Bearer sk-client-unused" } : {}),
    ...plain.headers,
  };
  const hasBody = plain.body !== undefined;
  const contentType = habits?.contentType ?? "application/json";
  if (hasBody) {
    headers["Content-Type"] = contentType;
    if (habits?.framing !== "chunked") headers["Content-Length"] = String(Buffer.byteLength(plain.body!));
    if (habits?.expectContinue) headers.Expect = "100-continue";
  } else if (habits) {
    const typed =
      habits.bodylessContentType === "always" ||
      (habits.bodylessContentType === "except-get" && plain.method !== "GET");
    if (typed) headers["Content-Type"] = contentType;
    if (habits.bodylessLength === "zero") headers["Content-Length"] = "0";
  }
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: plain.method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () =>
        resolve({
          status: res.statusCode!,
          type: String(res.headers["content-type"] ?? "").split(";")[0]!,
          text: Buffer.concat(chunks).toString("utf8"),
        }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
    const write = () => {
      if (!hasBody) return req.end();
      if (habits?.framing === "chunked") {
        // Two chunks, split inside the JSON: the parser must see the whole body, not the first piece.
        const half = Math.floor(plain.body!.length / 2);
        req.write(plain.body!.slice(0, half));
        req.end(plain.body!.slice(half));
      } else req.end(plain.body);
    };
    if (hasBody && habits?.expectContinue) {
      req.flushHeaders();
      req.on("continue", write);
    } else write();
  });
}

/** The kind of a JSON value: keys and value types, an error's code; ids, times and texts left out. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.length === 0 ? "array" : ["array", shape(value[0])];
  if (value === null) return "null";
  if (typeof value !== "object") return typeof value;
  const object = value as Record<string, unknown>;
  const error = object.error as { code?: unknown } | undefined;
  if (error && typeof error === "object" && typeof error.code === "string") return { error: error.code };
  return Object.fromEntries(
    Object.keys(object)
      .sort()
      .map((key) => [key, shape(object[key])]),
  );
}

function kind(answer: Answer): unknown {
  if (answer.type !== "application/json") return { status: answer.status, type: answer.type };
  return { status: answer.status, type: answer.type, body: shape(JSON.parse(answer.text)) };
}

const json = (value: unknown) => JSON.stringify(value);

/**
 * Two kinds match when they are equal, except where what is stored decides: a list may be empty in one
 * and not the other (earlier requests add to the user's sessions), and a nullable field (a next cursor)
 * may be null in one. Status, content type, keys and error codes must be equal.
 */
function sameKind(a: unknown, b: unknown): boolean {
  if (a === "null" || b === "null") return true;
  if (a === "array" || b === "array")
    return a === b || (Array.isArray(a) && a[0] === "array") || (Array.isArray(b) && b[0] === "array");
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return a === b;
  const keysA = Object.keys(a).sort();
  const keysB = Object.keys(b).sort();
  if (json(keysA) !== json(keysB)) return false;
  return keysA.every((key) => sameKind((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]));
}

/** Valid bodies and queries by `METHOD path`, as in the OpenAPI document. */
const EXAMPLES: Record<string, { body?: unknown; query?: string; headers?: Record<string, string> }> = {
  "POST /v1/chat/completions": { body: { model: "fake-model", messages: [{ role: "user", content: "hi" }] } },
  "POST /v1/sessions": { body: { metadata: { project: "habits" } } },
  "POST /v1/sessions/{id}/messages": { body: { messages: [{ role: "user", content: "one more" }] } },
  "GET /v1/sessions/{id}/search": { query: "q=hello" },
  "GET /v1/search": { query: "q=hello" },
  "POST /v1/sessions/{id}/fork": { body: { atSeq: 1 } },
  "PATCH /v1/sessions/{id}/state": { body: { data: { a: 1 } } },
  "PUT /v1/sessions/{id}/preferences": { body: { maxRecentMessages: 5 } },
  "POST /v1/memories": { body: { text: "Likes green tea." } },
  "PATCH /v1/memories/{id}": { body: { text: "Likes black tea." } },
  "POST /mcp": {
    body: { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} },
    headers: { Accept: "application/json, text/event-stream" },
  },
  "POST /v1/responses": { body: { model: "fake-model", input: "hi" } },
  "POST /v1/conversations": { body: { items: [{ type: "message", role: "user", content: "hi" }] } },
  "POST /v1/conversations/{id}": { body: { metadata: { topic: "tea" } } },
  "POST /v1/conversations/{id}/items": { body: { items: [{ type: "message", role: "user", content: "more" }] } },
};

/** Every `METHOD path` of the OpenAPI document, with what it documents. */
const ROUTES = Object.entries(openApiDocument.paths as Record<string, Record<string, any>>).flatMap(
  ([path, operations]) =>
    Object.entries(operations).map(([method, operation]) => ({
      method: method.toUpperCase(),
      path,
      hasBody: operation.requestBody !== undefined,
      requiredQuery: ((operation.parameters ?? []) as { in: string; name: string; required?: boolean }[])
        .filter((p) => p.in === "query" && p.required)
        .map((p) => p.name),
      statuses: Object.keys(operation.responses ?? {}).map(Number),
    })),
);

async function plainJson(method: string, path: string, body?: unknown): Promise<any> {
  const answer = await send({ method, path, body: body === undefined ? undefined : json(body) });
  expect(answer.status, `${method} ${path}: ${answer.text}`).toBeLessThan(300);
  return JSON.parse(answer.text);
}

/** A session with a turn and a branch, of the default user. */
async function freshSession(): Promise<{ id: string; branchId: number }> {
  const id = randomUUID();
  await stack.memory.addMessages(id, [
    { role: "user", content: "hello there" },
    { role: "assistant", content: "hi" },
  ]);
  await stack.memory.replaceAfter(id, 1, [{ role: "assistant", content: "hello" }], {
    branch: { reason: "regenerate" },
  });
  const [branch] = await stack.memory.listBranches(id);
  return { id, branchId: branch!.id };
}

/**
 * A fresh request of a route: its path parameters name things made for it (a deleted session must
 * not be the next request's), its body and query from {@link EXAMPLES}.
 */
async function requestOf(route: (typeof ROUTES)[number]): Promise<Plain> {
  const key = `${route.method} ${route.path}`;
  const example = EXAMPLES[key] ?? {};
  let path = route.path;
  const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
  const fill = (name: string, value: string | number) =>
    (path = path.replace(`{${name}}`, encodeURIComponent(String(value))));
  if (params.length > 0) {
    if (path.startsWith("/v1/sessions/") || path.startsWith("/ui/s/")) {
      const session = await freshSession();
      fill("id", session.id);
      if (params.includes("branchId")) fill("branchId", session.branchId);
      if (params.includes("view")) fill("view", "history");
    } else if (path.startsWith("/v1/memories/")) {
      fill("id", (await plainJson("POST", "/v1/memories", { text: "Likes tea." })).id);
    } else if (path.startsWith("/v1/responses/")) {
      fill("id", (await plainJson("POST", "/v1/responses", { model: "fake-model", input: "hi" })).id);
    } else if (path.startsWith("/v1/conversations/")) {
      const conversation = await plainJson("POST", "/v1/conversations", {
        items: [{ type: "message", role: "user", content: "hi" }],
      });
      fill("id", conversation.id);
      if (params.includes("item_id"))
        fill("item_id", (await plainJson("GET", `/v1/conversations/${conversation.id}/items`)).data[0].id);
    } else if (path.startsWith("/v1/models/")) {
      fill("id", "fake-model");
    } else if (path.startsWith("/ui/assets/")) {
      fill("file", "app.js");
    }
  }
  expect(path, `${key}: say in requestOf how to fill its path parameters`).not.toMatch(/\{\w+\}/);
  if (route.hasBody) expect(example.body, `${key} takes a body: add an example to EXAMPLES`).toBeDefined();
  for (const name of route.requiredQuery)
    expect(example.query ?? "", `${key} needs ?${name}: add it to EXAMPLES`).toContain(`${name}=`);
  return {
    method: route.method,
    path: example.query ? `${path}?${example.query}` : path,
    body: example.body === undefined ? undefined : json(example.body),
    headers: example.headers,
  };
}

const plainKinds = new Map<string, unknown>();

/** What a route answers to its plain request (no habits), once per route: every set compares to it. */
async function plainKind(route: (typeof ROUTES)[number]): Promise<unknown> {
  const key = `${route.method} ${route.path}`;
  const known = plainKinds.get(key);
  if (known !== undefined) return known;
  const plain = await send(await requestOf(route));
  // The plain request is a valid one: a documented success (GET and DELETE /mcp are 405 by design).
  if (route.statuses.some((s) => s >= 200 && s < 300))
    expect(plain.status, `${key} plain: ${plain.text}`).toBeLessThan(300);
  plainKinds.set(key, kind(plain));
  return kind(plain);
}

describe("real clients' HTTP habits on every route", () => {
  it("enumerates every route the server has from the OpenAPI document", () => {
    // The document and the server agree both ways: each documented route is registered, and each
    // registered API route is documented (so none escapes this test).
    const documented = new Set(ROUTES.map((r) => `${r.method} ${r.path.replace(/\{(\w+)\}/g, ":$1")}`));
    for (const route of ROUTES) {
      expect(
        stack.server.app.hasRoute({ method: route.method as "GET", url: route.path.replace(/\{(\w+)\}/g, ":$1") }),
        `${route.method} ${route.path}`,
      ).toBe(true);
    }
    const registered = registeredRoutes(stack.server.app.printRoutes({ commonPrefix: false }));
    const api = registered.filter(
      (r) => /^\S+ \/(v1\/|mcp|ui|healthz|readyz|metrics|openapi\.json)/.test(r) && !r.startsWith("HEAD "),
    );
    expect(api.length).toBeGreaterThanOrEqual(50);
    expect(api.filter((r) => !documented.has(r))).toEqual([]);
    expect(ROUTES.length).toBe(documented.size);
  });

  it.each(HTTP_HABITS.map((habits) => [habits.name, habits] as const))(
    "%s: each route answers as without the habits",
    async (_name, habits) => {
      const differences: string[] = [];
      for (const route of ROUTES) {
        const plain = await plainKind(route);
        const withHabits = await send(await requestOf(route), habits);
        if (!sameKind(plain, kind(withHabits))) {
          differences.push(
            `${route.method} ${route.path}: plain ${json(plain)}, with habits ${withHabits.status} ${withHabits.text.slice(0, 200)}`,
          );
        }
      }
      expect(differences).toEqual([]);
    },
  );
});
