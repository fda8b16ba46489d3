/**
 * The OpenAPI document is generated from the routes' contracts; these tests hold it to the server:
 * the same routes both ways (no count kept by hand), every reference resolved, and the limits it
 * states are the limits the routes enforce.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openApiDocument } from "../../src/server/openapi/index.js";
import { registeredRoutes } from "./_routes.js";
import { type Stack, startStack } from "./_stack.js";

type Operation = { parameters?: { name: string; in: string; required?: boolean; schema: Record<string, unknown> }[] };
const paths = openApiDocument.paths as Record<string, Record<string, Operation>>;
const documented = Object.entries(paths).flatMap(([path, operations]) =>
  Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`),
);

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack.close();
});

describe("the OpenAPI document", () => {
  it("has every registered route with its method, and nothing else", () => {
    const registered = registeredRoutes(stack.server.app.printRoutes({ commonPrefix: false }))
      .filter((route) => !route.startsWith("HEAD "))
      .map((route) => route.replace(/:(\w+)/g, "{$1}"));
    expect(new Set(registered).size).toBe(registered.length);
    expect([...registered].sort()).toEqual([...documented].sort());
  });

  it("is what GET /openapi.json serves", async () => {
    const served = await stack.request("GET", "/openapi.json");
    expect(served.status).toBe(200);
    expect(await served.json()).toEqual(JSON.parse(JSON.stringify(openApiDocument)));
  });

  it("declares each path parameter and resolves each reference", () => {
    for (const [path, operations] of Object.entries(paths)) {
      const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
      for (const [method, operation] of Object.entries(operations)) {
        const declared = (operation.parameters ?? [])
          .filter((p) => p.in === "path")
          .map((p) => p.name)
          .sort();
        expect(declared, `${method} ${path}`).toEqual(inPath);
      }
    }
    const refs = [...JSON.stringify(openApiDocument).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(0);
    const schemas = openApiDocument.components.schemas as Record<string, unknown>;
    for (const ref of new Set(refs)) {
      expect(ref).toMatch(/^#\/components\/schemas\//);
      expect(schemas[ref.slice("#/components/schemas/".length)], ref).toBeDefined();
    }
  });

  it("states the limits the routes enforce: one past a documented bound is refused, the bound is not", async () => {
    // The routes that read their query before anything else: without a path, or a session's.
    const checked: string[] = [];
    for (const [path, operations] of Object.entries(paths)) {
      if (!path.startsWith("/v1/") || !/^\/v1\/(sessions\/\{id\}\/[a-z]+|[a-z]+)$/.test(path)) continue;
      const query = operations.get?.parameters?.filter((p) => p.in === "query") ?? [];
      const base = Object.fromEntries(query.filter((p) => p.required).map((p) => [p.name, "hello"]));
      for (const parameter of query) {
        for (const [bound, step] of [
          ["maximum", 1],
          ["minimum", -1],
        ] as const) {
          const limit = parameter.schema[bound];
          if (typeof limit !== "number") continue;
          const url = (value: number) =>
            `${path.replace("{id}", randomUUID())}?${new URLSearchParams({ ...base, [parameter.name]: String(value) })}`;
          const past = await stack.request("GET", url(limit + step));
          const body = (await past.json()) as { error?: { code?: string; message?: string } };
          expect(past.status, `${path} ${parameter.name}=${limit + step}`).toBe(400);
          expect(body.error?.code).toBe("invalid_request");
          expect(body.error?.message).toContain(parameter.name);
          const at = await stack.request("GET", url(limit));
          expect(at.status, `${path} ${parameter.name}=${limit}`).not.toBe(400);
          checked.push(`${path} ${parameter.name} ${bound}`);
        }
      }
    }
    // The session listing, messages, search and memories all have bounded pages.
    for (const bound of [
      "/v1/sessions limit maximum",
      "/v1/sessions/{id}/messages limit maximum",
      "/v1/search limit maximum",
      "/v1/memories limit maximum",
    ]) {
      expect(checked).toContain(bound);
    }
  });
});
