/**
 * A generated corpus of bad client input over every route of the OpenAPI document: wrong types in
 * every field of a known-good body, broken and hostile JSON, bad path ids, bad query parameters and
 * headers. Deterministic (fixed seed), so a failure names a case that reproduces.
 *
 * To cover a new route, add a {@link RouteExample} to {@link ROUTE_EXAMPLES} (a valid body and query);
 * routes without one are still covered by the generic cases.
 */
import { openApiDocument } from "../../src/server/openapi/index.js";

/** One request of the corpus. `{id}` in the path is replaced by the session the case targets. */
export interface BadCase {
  name: string;
  method: string;
  path: string;
  /** Raw body text (sent as is), or undefined for none. */
  body?: string;
  contentType?: string;
  headers?: Record<string, string>;
  /** The case targets a session that does not exist: it must still not exist afterwards. */
  fresh: boolean;
}

/** A valid request of a route, the base its mutations start from. */
export interface RouteExample {
  body?: unknown;
  query?: Record<string, string>;
  headers?: Record<string, string>;
}

/** Valid examples by `METHOD path` (as in the OpenAPI document). */
export const ROUTE_EXAMPLES: Record<string, RouteExample> = {
  "POST /v1/chat/completions": {
    body: {
      model: "m",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "hi" }], name: "alice" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }],
        },
        { role: "tool", tool_call_id: "c1", content: "42", metadata: { k: 1 } },
      ],
      stream: false,
    },
  },
  "POST /v1/responses": { body: { model: "m", input: [{ role: "user", content: "hi" }], store: true } },
  "POST /v1/conversations": {
    body: { items: [{ type: "message", role: "user", content: "hi" }], metadata: { a: "b" } },
  },
  "POST /v1/conversations/{id}/items": { body: { items: [{ type: "message", role: "user", content: "hi" }] } },
  "POST /v1/sessions": { body: { id: "{id}", metadata: { project: "x" } } },
  "GET /v1/sessions": { query: { limit: "10", cursor: "abc" } },
  "GET /v1/sessions/{id}/messages": { query: { after: "0", limit: "10" } },
  "POST /v1/sessions/{id}/messages": {
    body: {
      messages: [
        { role: "user", content: "hi", metadata: { a: 1 } },
        { role: "assistant", content: "yo" },
      ],
    },
  },
  "GET /v1/sessions/{id}/search": { query: { q: "hi", limit: "5", mode: "substring" } },
  "GET /v1/search": { query: { q: "hi", limit: "5", mode: "substring", session: "{id}" } },
  "GET /v1/sessions/{id}/context": { query: { model: "gpt-4o", window: "5", tokenBudget: "1000" } },
  "POST /v1/sessions/{id}/fork": { body: { atSeq: 1 } },
  "PATCH /v1/sessions/{id}/state": { body: { data: { a: 1, conversation: null }, expectedVersion: 0 } },
  "PUT /v1/sessions/{id}/preferences": {
    body: { maxRecentMessages: 5, focusRange: { fromSeq: 1, toSeq: 2 }, pinnedSeqs: [1], sticky: true },
  },
  "POST /mcp": { body: { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} } },
};

/** A deterministic pseudo-random generator (mulberry32). */
export function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const deepArray = (depth: number) => `${"[".repeat(depth)}1${"]".repeat(depth)}`;
const deepObject = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;

/** Values of the wrong type or shape for any field, as JSON text. */
const BAD_VALUES: string[] = [
  "true",
  "0",
  "-1",
  "1.5",
  "1e308",
  "null",
  '""',
  '"x"',
  "[]",
  "{}",
  "[null]",
  '{"a":{}}',
  '"\\u0000"',
  '"\\ud800"',
  JSON.stringify("y".repeat(20_000)),
  deepArray(100),
  deepObject(5000),
];

/** Whole bodies that are not what any route takes. */
const BAD_BODIES: { name: string; body: string; contentType?: string }[] = [
  { name: "empty", body: "" },
  { name: "null", body: "null" },
  { name: "array", body: "[]" },
  { name: "number", body: "1" },
  { name: "string", body: '"s"' },
  { name: "truncated", body: '{"messages": [' },
  { name: "not JSON", body: "tru" },
  { name: "object", body: "{}" },
  { name: "deep arrays", body: deepArray(5000) },
  { name: "deep objects", body: deepObject(5000) },
  { name: "NUL key", body: '{"\\u0000":1}' },
  { name: "proto", body: '{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}' },
  { name: "text/plain", body: "{}", contentType: "text/plain" },
  { name: "form", body: "a=1", contentType: "application/x-www-form-urlencoded" },
];

/** Path ids that are not a session id (or are odd spellings of one). */
const BAD_IDS = [
  "not-a-uuid",
  "%00",
  "x".repeat(300),
  "..%2F..%2Fetc",
  "{}",
  "00000000-0000-0000-0000-000000000000",
  "%F0%9F%98%80",
];

/** Values no query parameter takes. */
const BAD_QUERY = [
  "",
  "-1",
  "0",
  "abc",
  "1e309",
  "99999999999999999999",
  "%00",
  "x".repeat(3000),
  "1.5",
  "%ZZ",
  "true",
];

/** Replaces the value at `path` of a JSON value (a copy) with raw JSON text. */
function withValueAt(base: unknown, path: (string | number)[], raw: string): string {
  const marker = "\u0001MARK\u0001";
  const copy = structuredClone(base) as Record<string | number, unknown>;
  let node = copy as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  node[path[path.length - 1]] = marker;
  return JSON.stringify(copy).replace(JSON.stringify(marker), raw);
}

/** Every path into a value (objects and arrays, three levels below the root's children). */
function pathsOf(value: unknown, prefix: (string | number)[] = [], depth = 0): (string | number)[][] {
  if (depth > 4 || typeof value !== "object" || value === null) return [];
  const entries: [string | number, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [i, v])
    : Object.entries(value as Record<string, unknown>);
  return entries.flatMap(([key, child]) => [[...prefix, key], ...pathsOf(child, [...prefix, key], depth + 1)]);
}

const fill = (text: string, id: string) => text.replaceAll("{id}", id);

function queryString(query: Record<string, string>): string {
  const parts = Object.entries(query).map(
    ([k, v]) => `${encodeURIComponent(k)}=${v.startsWith("%") ? v : encodeURIComponent(v)}`,
  );
  return parts.length > 0 ? `?${parts.join("&")}` : "";
}

/** Every `METHOD path` of the OpenAPI document with its query parameter names. */
export function documentedRoutes(): { method: string; path: string; query: string[]; hasBody: boolean }[] {
  const routes = [];
  for (const [path, operations] of Object.entries(openApiDocument.paths as Record<string, Record<string, any>>)) {
    for (const [method, operation] of Object.entries(operations)) {
      const parameters: { in: string; name: string }[] = operation.parameters ?? [];
      routes.push({
        method: method.toUpperCase(),
        path,
        query: parameters.filter((p) => p.in === "query").map((p) => p.name),
        hasBody: operation.requestBody !== undefined,
      });
    }
  }
  return routes;
}

/**
 * The corpus: for each documented route, its bad path ids, bad query values, bad whole bodies, and
 * each field of its example body replaced by each bad value; on an existing session and a fresh one.
 * `existing` and `fresh()` give the session ids to use.
 */
export function buildCorpus(existing: string, fresh: () => string, seed = 9): BadCase[] {
  const next = random(seed);
  const cases: BadCase[] = [];
  for (const route of documentedRoutes()) {
    const key = `${route.method} ${route.path}`;
    const example = ROUTE_EXAMPLES[key] ?? {};
    const takesBody = route.hasBody || example.body !== undefined;
    const withId = route.path.includes("{id}");
    const add = (
      name: string,
      target: "fresh" | "existing",
      build: (id: string) => Omit<BadCase, "name" | "fresh" | "method">,
    ) => {
      const id = target === "fresh" ? fresh() : existing;
      cases.push({ name: `${key} ${name} (${target})`, method: route.method, fresh: target === "fresh", ...build(id) });
    };
    const baseQuery = (id: string) =>
      Object.fromEntries(Object.entries(example.query ?? {}).map(([k, v]) => [k, fill(v, id)]));
    const baseBody = (id: string) => (example.body === undefined ? undefined : fill(JSON.stringify(example.body), id));
    const target = (): "fresh" | "existing" => (next() < 0.5 ? "fresh" : "existing");
    const pathFor = (id: string) => route.path.replaceAll("{id}", id).replaceAll("{item_id}", "item_1");
    const chatHeaders = (id: string) => (route.path.startsWith("/v1/chat/") ? { "x-session-id": id } : undefined);

    if (withId) {
      for (const bad of BAD_IDS) {
        cases.push({
          name: `${key} path id ${bad.slice(0, 20)}`,
          method: route.method,
          path: `${route.path.replaceAll("{id}", bad).replaceAll("{item_id}", "item_1")}${queryString(baseQuery(existing))}`,
          body: baseBody(existing),
          fresh: false,
        });
      }
    }
    for (const name of new Set([...route.query, ...Object.keys(example.query ?? {})])) {
      for (const bad of BAD_QUERY) {
        add(`query ${name}=${bad.slice(0, 12)}`, target(), (id) => ({
          path: `${pathFor(id)}${queryString({ ...baseQuery(id), [name]: bad })}`,
          body: baseBody(id),
          headers: chatHeaders(id),
        }));
      }
      add(`query ${name} repeated`, target(), (id) => ({
        path: `${pathFor(id)}${queryString(baseQuery(id))}&${name}=a&${name}=b`,
        body: baseBody(id),
        headers: chatHeaders(id),
      }));
    }
    if (!takesBody) continue;
    for (const bad of BAD_BODIES) {
      add(`body ${bad.name}`, target(), (id) => ({
        path: `${pathFor(id)}${queryString(baseQuery(id))}`,
        body: bad.body,
        contentType: bad.contentType,
        headers: chatHeaders(id),
      }));
    }
    if (example.body === undefined) continue;
    const fields = pathsOf(example.body);
    for (const field of fields) {
      for (const raw of BAD_VALUES) {
        add(`${field.join(".")} = ${raw.slice(0, 16)}`, target(), (id) => ({
          path: `${pathFor(id)}${queryString(baseQuery(id))}`,
          body: fill(withValueAt(example.body, field, raw), id),
          headers: chatHeaders(id),
        }));
      }
    }
    // Headers a chat client sends.
    if (route.path.startsWith("/v1/chat/")) {
      for (const bad of ["not-a-uuid", " ", "x".repeat(2000), "user_x_conv_y"]) {
        cases.push({
          name: `${key} x-session-id ${bad.slice(0, 12)}`,
          method: route.method,
          path: route.path,
          body: baseBody(existing),
          headers: { "x-session-id": bad },
          fresh: false,
        });
      }
      add("authorization odd", target(), (id) => ({
        path: route.path,
        body: baseBody(id),
        headers: { "x-session-id": id, authorization: "Bearer \u00ff" },
      }));
    }
  }
  return cases;
}
