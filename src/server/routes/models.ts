/**
 * `GET /v1/models` and `GET /v1/models/{id}`: the upstream's model list passed through, behind
 * threadkeep's auth, cached briefly (clients such as OpenWebUI ask on every page load).
 */
import type { FastifyInstance } from "fastify";
import { ThreadkeepError } from "../../core/errors.js";
import { type Upstream, UpstreamError } from "../../llm/openai-compatible.js";
import { itemFailures, notFound } from "./_item-pages.js";
import { addRoute } from "../openapi/route.js";
import { error, ok, withFailures } from "../openapi/schemas.js";

const route = withFailures(itemFailures);

/** The contracts of the /v1/models routes. */
export const modelContracts = {
  list: route({
    method: "GET",
    url: "/v1/models",
    summary: "The upstream's models (cached for 10 s)",
    responses: {
      "200": ok('`{ object: "list", data: Model[] }`'),
      "502": error("The upstream has no /models route (`upstream_error`)"),
    },
  }),
  get: route({
    method: "GET",
    url: "/v1/models/:id",
    summary: "One of the upstream's models (URL-encode ids with slashes)",
    notes: { id: "Model id" },
    responses: { "200": ok("A `model` object") },
  }),
};

/** Options of the model routes. */
export interface ModelRoutesDeps {
  upstream?: Upstream;
  /** How long the upstream's list is reused. @default 10000 */
  cacheMs?: number;
}

/** Adds the /v1/models routes. */
export function registerModelRoutes(app: FastifyInstance, deps: ModelRoutesDeps): void {
  const cacheMs = deps.cacheMs ?? 10_000;
  let cached: { at: number; list: Promise<unknown> } | undefined;

  const list = (): Promise<unknown> => {
    const upstream = deps.upstream;
    if (!upstream) {
      throw new ThreadkeepError(
        "upstream_not_configured",
        "No upstream model is configured: start threadkeep with --upstream <OpenAI-compatible base URL>",
      );
    }
    if (cached && Date.now() - cached.at < cacheMs) return cached.list;
    const pending = upstream.models().catch((error: unknown) => {
      cached = undefined;
      if (error instanceof UpstreamError && (error.upstreamStatus === 404 || error.upstreamStatus === 405)) {
        throw new UpstreamError(
          502,
          {
            error: {
              message: `The upstream ${upstream.baseUrl} has no /models route (it answered ${error.upstreamStatus}): name the model in each request`,
              type: "server_error",
              code: "upstream_error",
            },
          },
          `The upstream has no /models route`,
          { cause: error },
        );
      }
      throw error;
    });
    cached = { at: Date.now(), list: pending };
    return pending;
  };

  addRoute(app, modelContracts.list, async () => list());

  addRoute<{ Params: { id: string } }>(app, modelContracts.get, async (request) => {
    // Ids with slashes (`meta-llama/Llama-3.1-8B`) arrive URL-encoded, as the openai clients send them.
    const id = request.params.id;
    const models = (await list()) as { data?: unknown } | null;
    const model = Array.isArray(models?.data)
      ? models.data.find((m: { id?: unknown } | null) => m?.id === id)
      : undefined;
    if (!model) throw notFound("Model", id, "model");
    return model;
  });
}
