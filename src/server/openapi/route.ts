/**
 * A route's contract: its method and URL, the zod schemas its handler reads the request with, and
 * what only the document says (summary, notes on parameters, responses). Each route file defines its
 * contracts beside its handlers and registers them with {@link addRoute}; the OpenAPI document
 * (index.ts) is generated from the same contracts, so a limit or a field is written once.
 */
import type {
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
  RouteGenericInterface,
  RouteHandlerMethod,
} from "fastify";
import { z } from "zod";

/** An HTTP method a route answers. */
export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** One documented answer of a route. */
export interface ResponseDoc {
  description: string;
  /** The JSON body; without it (and without `media`) the answer lists no content. */
  json?: z.ZodType;
  /** Other media types the answer may come as, each a text body (`text/event-stream`, `text/html`). */
  media?: string[];
  /** Response headers, by name. */
  headers?: Record<string, z.ZodType>;
}

/** A request header the route reads, documented only (the handler reads it itself). */
export interface HeaderDoc {
  name: string;
  schema: z.ZodType;
  description: string;
}

/** What a route takes and answers. */
export interface RouteContract {
  method: Method;
  /** The fastify URL (`/v1/sessions/:id`). */
  url: string;
  summary: string;
  description?: string;
  /** Path parameters; one not named here is a string. */
  params?: z.ZodObject;
  query?: z.ZodObject;
  body?: z.ZodType;
  headers?: HeaderDoc[];
  /** Descriptions of path and query parameters, by name. */
  notes?: Record<string, string>;
  responses: Record<string, ResponseDoc>;
  /** Served without an API key. */
  open?: boolean;
}

/** A contract, typed. */
export const defineRoute = (contract: RouteContract): RouteContract => contract;

/** Registers a route by its contract, so the route served is the route documented. */
export function addRoute<R extends RouteGenericInterface = RouteGenericInterface>(
  app: FastifyInstance,
  contract: RouteContract,
  handler: RouteHandlerMethod<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, R>,
): void {
  app.route<R>({ method: contract.method, url: contract.url, handler });
}

/** The OpenAPI path of a fastify URL: `/v1/sessions/:id` is `/v1/sessions/{id}`. */
export const openApiPath = (url: string): string => url.replace(/:(\w+)/g, "{$1}");

const shown = new WeakMap<object, z.ZodType>();

/**
 * `schema`, shown in the document as `doc`: for a value the route takes as it comes and core checks
 * by hand (a chat message), `doc` describes it. Validation stays `schema`'s.
 */
export function shownAs<T extends z.ZodType>(schema: T, doc: z.ZodType): T {
  shown.set(schema, doc);
  return schema;
}

const COMPONENTS = "#/components/schemas/";
const SAFE_INT = Number.MAX_SAFE_INTEGER;

/** Rewrites zod's `$defs` references to components and drops zod's safe-integer bounds. */
function tidy(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(tidy);
  if (node === null || typeof node !== "object") return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "$schema" || key === "$defs") continue;
    if ((key === "minimum" && value === -SAFE_INT) || (key === "maximum" && value === SAFE_INT)) continue;
    out[key] = key === "$ref" && typeof value === "string" ? value.replace("#/$defs/", COMPONENTS) : tidy(value);
  }
  return out;
}

/**
 * The JSON Schemas of zod schemas, in the form of one OpenAPI document: a schema named with
 * `.meta({ id })` becomes a component, referenced wherever it is used.
 */
export class SchemaSet {
  readonly components: Record<string, unknown> = {};

  /** The JSON Schema of what `schema` accepts. @throws Error when two schemas share an id. */
  of(schema: z.ZodType): Record<string, unknown> {
    const json = z.toJSONSchema(schema, {
      io: "input",
      unrepresentable: "any",
      override: (ctx) => {
        const doc = shown.get(ctx.zodSchema);
        if (doc) Object.assign(ctx.jsonSchema, this.of(doc));
      },
    }) as Record<string, unknown>;
    for (const [id, def] of Object.entries((json.$defs ?? {}) as Record<string, unknown>)) {
      const tidied = tidy(def);
      const known = this.components[id];
      if (known !== undefined && JSON.stringify(known) !== JSON.stringify(tidied)) {
        throw new Error(`Two schemas are named ${id} in the OpenAPI document`);
      }
      this.components[id] = tidied;
    }
    return tidy(json) as Record<string, unknown>;
  }
}

const content = (schemas: SchemaSet, doc: ResponseDoc) => {
  const media: Record<string, unknown> = {};
  if (doc.json) media["application/json"] = { schema: schemas.of(doc.json) };
  for (const type of doc.media ?? []) media[type] = { schema: { type: "string" } };
  return Object.keys(media).length > 0 ? { content: media } : {};
};

/** The OpenAPI operation of a contract. */
export function operationOf(contract: RouteContract, schemas: SchemaSet): Record<string, unknown> {
  const notes = contract.notes ?? {};
  const parameters: Record<string, unknown>[] = [];
  for (const [, name] of contract.url.matchAll(/:(\w+)/g)) {
    const shape = contract.params?.shape[name];
    const schema = shape ? schemas.of(shape as z.ZodType) : { type: "string" };
    parameters.push({ name, in: "path", required: true, schema, ...(notes[name] ? { description: notes[name] } : {}) });
  }
  for (const header of contract.headers ?? []) {
    parameters.push({
      name: header.name,
      in: "header",
      schema: schemas.of(header.schema),
      description: header.description,
    });
  }
  if (contract.query) {
    const query = schemas.of(contract.query);
    const required = new Set((query.required ?? []) as string[]);
    for (const [name, schema] of Object.entries(query.properties as Record<string, Record<string, unknown>>)) {
      const { description, ...rest } = schema;
      const text = notes[name] ?? description;
      parameters.push({
        name,
        in: "query",
        required: required.has(name),
        schema: rest,
        ...(text ? { description: text } : {}),
      });
    }
  }
  const responses = Object.fromEntries(
    Object.entries(contract.responses).map(([status, doc]) => [
      status,
      {
        description: doc.description,
        ...(doc.headers
          ? {
              headers: Object.fromEntries(
                Object.entries(doc.headers).map(([name, schema]) => [name, { schema: schemas.of(schema) }]),
              ),
            }
          : {}),
        ...content(schemas, doc),
      },
    ]),
  );
  return {
    summary: contract.summary,
    ...(contract.description ? { description: contract.description } : {}),
    ...(contract.open ? { security: [] } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(contract.body
      ? {
          requestBody: {
            // A body the route also takes missing (a default, or nullish) is optional.
            required: !contract.body.safeParse(undefined).success,
            content: { "application/json": { schema: schemas.of(contract.body) } },
          },
        }
      : {}),
    responses,
  };
}

/** The `paths` and component schemas of an OpenAPI document of `contracts`. */
export function describeRoutes(contracts: readonly RouteContract[]): {
  paths: Record<string, Record<string, unknown>>;
  schemas: Record<string, unknown>;
} {
  const schemas = new SchemaSet();
  const paths: Record<string, Record<string, unknown>> = {};
  for (const contract of contracts) {
    const path = (paths[openApiPath(contract.url)] ??= {});
    const method = contract.method.toLowerCase();
    if (path[method]) throw new Error(`${contract.method} ${contract.url} has two contracts`);
    path[method] = operationOf(contract, schemas);
  }
  return { paths, schemas: schemas.components };
}
